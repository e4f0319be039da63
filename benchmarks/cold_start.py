"""Cold start of the API function, each figure measured in new Python processes: the import of
its module (which is the whole init: clients, app and warm-up included), the first request
after it, and the first request after the SnapStart after-restore hooks.

Imports are measured with compiled bytecode (`.pyc`), compiled once beforehand into a cache of
the benchmark's own: that is how Python normally starts a second time, and how a package that
ships bytecode starts. The same import compiling from source is printed too, for comparison.

    python benchmarks/cold_start.py [--runs 5]

Exit status 1 when a median misses its budget.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import (
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.lambda_bridge import function_url_event, lambda_environment

ROOT = Path(__file__).resolve().parent.parent
IMPORT_BUDGET_SECONDS = 0.4
FIRST_REQUEST_BUDGET_SECONDS = 0.02

# A fresh process: import the handler, then its first and second requests. With RESTORE, the
# after-restore hooks run between the import and the first request, as in an instance
# restored from a snapshot taken after the init.
_FIRST_REQUEST = """
import json, sys, time
started = time.perf_counter()
from durable_streams_aws.functions.api import handler
imported = time.perf_counter()
from durable_streams_aws.infra.lambda_bridge import LambdaContext
hooks = 0.0
if RESTORE:
    import durable_streams_aws.functions.api
    from durable_streams_aws.functions import _snapstart
    t = time.perf_counter()
    _snapstart.after_restore(durable_streams_aws.functions.api._backend)
    hooks = time.perf_counter() - t
context = LambdaContext()
events = json.loads(sys.stdin.read())
times = []
for event in events:
    t = time.perf_counter()
    answer = handler(event, context)
    times.append(time.perf_counter() - t)
    assert answer["statusCode"] in (200, 201), answer
print(json.dumps({"import": imported - started, "hooks": hooks, "first": times[0],
                  "second": times[1]}))
"""


def _import_time(env: dict[str, str]) -> tuple[float, float, list[tuple[int, str]]]:
    """Per -X importtime: `functions.api` cumulative (seconds), its own module body (the
    init work: clients, app, warm-up), and the heaviest packages (their modules' own
    microseconds added up, so that a package is counted whoever imports it)."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import durable_streams_aws.functions.api"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    total = own = 0
    packages: dict[str, int] = {}
    inside = False
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        own_text, cumulative, name = (part.strip() for part in line[12:].split("|"))
        if not cumulative.isdigit():
            continue
        if name == "site":  # the interpreter's own start ends here; the handler's begins
            inside = True
        elif name == "durable_streams_aws.functions.api":
            total, own = int(cumulative), int(own_text)
        elif inside:
            parts = name.split(".")
            package = ".".join(parts[:2]) if parts[0] == "durable_streams_aws" else parts[0]
            packages[package] = packages.get(package, 0) + int(own_text)
    heavy = sorted(((micros, name) for name, micros in packages.items()), reverse=True)
    return total / 1e6, own / 1e6, heavy[:8]


def _requests(env: dict[str, str], stream: str, restore: bool) -> dict[str, float]:
    path = f"/v1/stream/{stream}"
    events = [
        function_url_event("PUT", path, [("content-type", "text/plain")], b"x", "::1"),
        function_url_event("GET", f"{path}?offset=-1", [], b"", "::1"),
    ]
    run = subprocess.run(
        [sys.executable, "-c", _FIRST_REQUEST.replace("RESTORE", str(restore))],
        input=json.dumps(events),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def _with_bytecode(env: dict[str, str], cache: str) -> dict[str, str]:
    """`env` with Python's bytecode cache on, kept in `cache` (not beside the sources)."""
    with_cache = {name: value for name, value in env.items() if name != "PYTHONDONTWRITEBYTECODE"}
    with_cache["PYTHONPYCACHEPREFIX"] = cache
    return with_cache


def _verdict(seconds: float, budget: float) -> str:
    met = "met" if seconds < budget else "NOT MET"
    return f"(budget {budget * 1000:.0f} ms: {met})"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    use_emulator_credentials()
    with Emulator() as emulator:
        settings = Settings(table="cold", bucket="cold-data")
        ensure_resources(build_backend(settings, endpoint=emulator.endpoint))
        source_env = {**os.environ, **lambda_environment(emulator.endpoint, "cold", "cold-data")}
        source_env["PYTHONDONTWRITEBYTECODE"] = "1"
        with tempfile.TemporaryDirectory(prefix="cold-start-pyc-") as bytecode:
            env = _with_bytecode(source_env, bytecode)
            _import_time(env)  # compiles every module once, as a build that ships .pyc does
            imports, inits, fresh, restored = [], [], [], []
            heavy: list[tuple[int, str]] = []
            for run_number in range(args.runs):
                seconds, own, heavy = _import_time(env)
                imports.append(seconds)
                inits.append(own)
                fresh.append(_requests(env, f"cold-{run_number}", restore=False))
                restored.append(_requests(env, f"restored-{run_number}", restore=True))
            from_source = [_import_time(source_env)[0] for _ in range(max(1, args.runs // 2))]

    def median_ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    median_import = statistics.median(imports)
    median_first = statistics.median(r["first"] for r in fresh)
    print(
        f"handler module import (python -X importtime, median of {args.runs}): "
        f"{median_import * 1000:.0f} ms {_verdict(median_import, IMPORT_BUDGET_SECONDS)}, "
        f"fastest {min(imports) * 1000:.0f} ms"
    )
    print(f"  of which the module's own init (clients, app, warm-up): {median_ms(inits):.0f} ms")
    print(
        "  the same import compiling every module from source (no .pyc: what a package "
        f"built without bytecode pays): {median_ms(from_source):.0f} ms"
    )
    print(
        f"first request in a fresh process (PUT, median):   {median_first * 1000:.1f} ms "
        f"{_verdict(median_first, FIRST_REQUEST_BUDGET_SECONDS)}"
    )
    print(
        "second request in the same process (GET, median): "
        f"{median_ms([r['second'] for r in fresh]):.1f} ms"
    )
    print(
        "after-restore hooks (SnapStart, median):           "
        f"{median_ms([r['hooks'] for r in restored]):.2f} ms"
    )
    print(
        "first request after them (PUT, median):            "
        f"{median_ms([r['first'] for r in restored]):.1f} ms"
    )
    print(
        "heaviest packages (ms, their modules' own import time added up): "
        + ", ".join(f"{name} {micros / 1000:.0f}" for micros, name in heavy)
    )
    met = median_import < IMPORT_BUDGET_SECONDS and median_first < FIRST_REQUEST_BUDGET_SECONDS
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
