"""The README's and docs/*.md's shell and Python examples run as written.

Every fenced `sh` and `python` block runs, unless the line before it opts out with a reason,
`<!-- example: skip (why) -->`; a block that cannot run is thereby a decision someone wrote
down, not an accident. A block runs in an empty directory of its own, shell examples in bash
with `set -euo pipefail` and `failglob` (an unset variable, a failed command in a pipeline,
and an unquoted `*` that matches no file fail, as zsh's `no matches found` does), each within
EXAMPLE_SECONDS. A block followed by `<!-- example: output -->` and a fence must print that
(standard output and error together, as a terminal shows them; `...` stands for any text
within a line).

Where they run:

- unmarked: against a fresh `dsaws serve` of their own; the server's address in the text,
  `http://127.0.0.1:4437`, becomes the test server's, and `DSAWS_URL` names it (the commands'
  default).
- `<!-- example: deploy -->`: against a stand-in for a deployed stack, `dsaws serve --auth`
  behind the local CDN with the origin locked to it, and the stack's outputs
  (`CdnStreamBaseUrl`, `DistributionUrl`, `FunctionUrl`, `StreamBaseUrl`) and key set in the
  variables the deploy walkthrough sets them in.

The README's first block is CI's own commands (`tests/test_docs.py` checks they are), and its
first lines may hold nothing else, so it is the one block skipped without a marker.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from auth_support import LOCKED_ORIGIN_ENV
from support import ServerProcess

from durable_streams_aws.infra.local_cdn import install_nginx

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("sh", "python")
EXAMPLE_SECONDS = 60.0
# The address the examples give the local server, `dsaws serve`'s default.
LOCAL_SERVER = "http://127.0.0.1:4437"
# What a deployed stack's outputs look like in the text, stood in for by the local CDN.
DISTRIBUTION = "https://dxxxx.cloudfront.net"
FUNCTION = "https://xxxx.lambda-url.us-east-1.on.aws/"
CI_COMMANDS = "CI's own commands: .ci/run runs them, tests/test_docs.py checks they are these"

_MARKER = re.compile(r"\s*<!-- example: (?P<what>.*?) -->\s*")
_SKIP = re.compile(r"skip \((?P<reason>.+)\)")
_FENCE = re.compile(r"(?P<indent> *)```(?P<info>[\w-]*)\s*")
_SHELL_ERROR = re.compile(r"^bash: line \d+: ", re.M)


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, counted from 1
    info: str
    code: str
    marker: str | None
    output: str | None = None  # what an example must print

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        if self.document.name == "README.md" and self.line == 3:
            return CI_COMMANDS
        found = _SKIP.fullmatch(self.marker or "")
        return found["reason"] if found else None

    @property
    def kind(self) -> str:
        return "deploy" if self.marker == "deploy" else "local"


def _fenced_blocks(document: Path) -> Iterator[Block]:
    """Every fenced block with the marker on the line before it, if any; an indented fence
    (inside a list item) has its indentation removed."""
    lines = document.read_text().splitlines()
    number = 0
    while number < len(lines):
        opening = _FENCE.fullmatch(lines[number])
        if opening is None:
            number += 1
            continue
        indent = opening["indent"]
        end = lines.index(f"{indent}```", number + 1)
        code = "".join(line.removeprefix(indent) + "\n" for line in lines[number + 1 : end])
        previous = next((line for line in reversed(lines[:number]) if line.strip()), "")
        marked = _MARKER.fullmatch(previous)
        yield Block(document, number + 1, opening["info"], code, marked and marked["what"])
        number = end + 1


def _examples(document: Path) -> list[Block]:
    """The `sh` and `python` blocks, each with the output block that follows it."""
    examples: list[Block] = []
    previous: Block | None = None
    for block in _fenced_blocks(document):
        if block.marker == "output":
            assert previous is not None and previous.info in LANGUAGES, (
                f"{block.name}: an output block follows no example"
            )
            examples[-1] = replace(examples[-1], output=block.code)
        elif block.info in LANGUAGES:
            examples.append(block)
        previous = block
    return examples


EXAMPLES = [block for document in DOCUMENTS for block in _examples(document)]
RUNNABLE = [block for block in EXAMPLES if block.skip_reason is None]


def test_every_marker_is_known_and_every_skip_says_why() -> None:
    markers = [
        (block.name, block.marker)
        for document in DOCUMENTS
        for block in _fenced_blocks(document)
        if block.marker is not None
    ]
    unknown = [
        (name, marker)
        for name, marker in markers
        if marker not in ("deploy", "output") and not _SKIP.fullmatch(marker)
    ]
    assert unknown == [], "markers are `skip (why)`, `deploy` or `output`"
    # The deploy walkthrough and the README's client examples at least are among those run.
    names = {block.name.split(":")[0] for block in RUNNABLE if block.kind == "deploy"}
    assert {"docs/deploying.md", "docs/security.md"} <= names
    assert sum(block.document.name == "README.md" for block in RUNNABLE) >= 2


@pytest.fixture(scope="module")
def deployment() -> Iterator[ServerProcess]:
    """`dsaws serve --auth` behind the local CDN, configured as the stack is: tokens required,
    the origin answering only what comes through the CDN."""
    install_nginx()
    with ServerProcess("--in-memory", "--auth", env=LOCKED_ORIGIN_ENV, with_cdn=True) as server:
        yield server


def _environment(extra: dict[str, str]) -> dict[str, str]:
    """What a reader's shell would have: the commands on PATH, none of this run's DS_ or
    DSAWS_ variables."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    keep = {name: os.environ[name] for name in ("HOME", "TMPDIR") if name in os.environ}
    return {**keep, "PATH": path, "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", **extra}


def _deployment_outputs(server: ServerProcess) -> dict[str, str]:
    assert server.cdn_url is not None
    return {
        "CdnStreamBaseUrl": f"{server.cdn_url}/v1/stream/",
        "DistributionUrl": server.cdn_url,
        "FunctionUrl": f"{server.base_url}/",
        "StreamBaseUrl": f"{server.base_url}/v1/stream/",
    }


def _run(block: Block, code: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Its exit status and what it printed; a block still running after EXAMPLE_SECONDS is
    ended with every process it started, and fails."""
    if block.info == "sh":
        command = ["bash", "-c", "set -euo pipefail\nshopt -s failglob\n" + code]
    else:
        command = [sys.executable, "-c", code]
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        # Bytes: text mode would read a progress line's carriage return as a new line.
        printed, _ = process.communicate(timeout=EXAMPLE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        printed, _ = process.communicate()
        pytest.fail(f"{block.name} still ran after {EXAMPLE_SECONDS:g} s:\n{printed.decode()}")
    return process.returncode, printed.decode()


def _as_shown(printed: str, addresses: dict[str, str]) -> str:
    """What a terminal shows: a carriage return's line starts over, and the test's servers
    have the addresses the text gives them."""
    for actual, shown in addresses.items():
        printed = printed.replace(actual, shown)
    lines = (line.rsplit("\r", 1)[-1].rstrip() for line in printed.strip("\n").split("\n"))
    return "\n".join(lines)


def _matches(expected: str, shown: str) -> bool:
    lines = expected.strip("\n").splitlines()
    pattern = "\n".join(".*?".join(map(re.escape, line.rstrip().split("..."))) for line in lines)
    return re.fullmatch(pattern, shown) is not None


@pytest.mark.integration
@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_the_example_runs_as_written(
    block: Block, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    code = block.code
    if block.kind == "deploy":
        server: ServerProcess = request.getfixturevalue("deployment")
        outputs = _deployment_outputs(server)
        env = _environment({**outputs, "DS_AUTH_SECRET": LOCKED_ORIGIN_ENV["DS_AUTH_SECRET"]})
        addresses = {
            outputs["StreamBaseUrl"]: f"{FUNCTION}v1/stream/",
            outputs["FunctionUrl"]: FUNCTION,
            outputs["DistributionUrl"]: DISTRIBUTION,
        }
        status, printed = _run(block, code, env, tmp_path)
    else:
        with ServerProcess("--in-memory") as server:
            code = code.replace(LOCAL_SERVER, server.base_url)
            env = _environment({"DSAWS_URL": f"{server.base_url}/v1/stream"})
            addresses = {server.base_url: LOCAL_SERVER}
            status, printed = _run(block, code, env, tmp_path)
    assert status == 0, f"{block.name} exited {status}:\n{printed}"
    # The shell's own complaints (a glob that matched nothing inside `$(...)`, say) leave the
    # status of the command around them 0.
    assert _SHELL_ERROR.search(printed) is None, f"{block.name}:\n{printed}"
    if block.output is not None:
        shown = _as_shown(printed, addresses)
        assert _matches(block.output, shown), (
            f"{block.name} printed\n{shown}\n\nbut the text says\n{block.output}"
        )
