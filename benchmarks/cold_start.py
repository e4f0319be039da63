"""Cold start of the API function: import time of its module and a fresh process's first
request, each measured in a new Python process.

    python benchmarks/cold_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from core.config import Settings
from core.runtime import build_backend, ensure_resources, use_emulator_credentials
from infra.emulator import Emulator
from infra.lambda_bridge import function_url_event, lambda_environment

ROOT = Path(__file__).resolve().parent.parent
IMPORT_BUDGET_SECONDS = 1.0

_FIRST_REQUEST = """
import json, sys, time
started = time.perf_counter()
from functions.api import handler
imported = time.perf_counter()
from infra.lambda_bridge import LambdaContext
context = LambdaContext()
events = json.loads(sys.stdin.read())
times = []
for event in events:
    t = time.perf_counter()
    answer = handler(event, context)
    times.append(time.perf_counter() - t)
    assert answer["statusCode"] in (200, 201), answer
print(json.dumps({"import": imported - started, "first": times[0], "second": times[1]}))
"""


def _import_time(env: dict[str, str]) -> tuple[float, list[tuple[int, str]]]:
    """Cumulative microseconds of `functions.api` per -X importtime, and the heaviest imports."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import functions.api"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    total = 0
    heavy: list[tuple[int, str]] = []
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[12:].split("|"))
        if not cumulative.isdigit():
            continue
        if name == "functions.api":
            total = int(cumulative)
        if not name.startswith(" ") and "." not in name:
            heavy.append((int(cumulative), name))
    return total / 1e6, sorted(heavy, reverse=True)[:6]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    use_emulator_credentials()
    with Emulator() as emulator:
        settings = Settings(table="cold", bucket="cold-data")
        ensure_resources(build_backend(settings, endpoint=emulator.endpoint))
        env = {**os.environ, **lambda_environment(emulator.endpoint, "cold", "cold-data")}
        import_times, firsts, seconds = [], [], []
        heavy: list[tuple[int, str]] = []
        for run_number in range(args.runs):
            seconds_taken, heavy = _import_time(env)
            import_times.append(seconds_taken)
            path = f"/v1/stream/cold-{run_number}"
            events = [
                function_url_event("PUT", path, [("content-type", "text/plain")], b"x", "::1"),
                function_url_event("GET", f"{path}?offset=-1", [], b"", "::1"),
            ]
            run = subprocess.run(
                [sys.executable, "-c", _FIRST_REQUEST],
                input=json.dumps(events),
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(run.stdout.strip().splitlines()[-1])
            firsts.append(figures["first"])
            seconds.append(figures["second"])
    median_import = statistics.median(import_times)
    print(
        f"handler module import (python -X importtime, median of {args.runs}): "
        f"{median_import * 1000:.0f} ms (budget {IMPORT_BUDGET_SECONDS * 1000:.0f} ms)"
    )
    first_ms = statistics.median(firsts) * 1000
    second_ms = statistics.median(seconds) * 1000
    print(f"first request in a fresh process (PUT, median):   {first_ms:.1f} ms")
    print(f"second request in the same process (GET, median): {second_ms:.1f} ms")
    print(
        "heaviest top-level imports (cumulative ms): "
        + ", ".join(f"{name} {micros / 1000:.0f}" for micros, name in heavy)
    )
    return 0 if median_import < IMPORT_BUDGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
