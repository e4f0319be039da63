"""Servers in processes of their own, for benchmarks that must not share a process (or its GIL)
with the clients they measure, and for the tests that start them the same way
(tests/support.py's `ServerProcess`)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx

from interop import CACHE, find_node, install_node_project

ROOT = Path(__file__).resolve().parent.parent
# The flags by which `dsaws serve` is told where its data goes; without one, it would use the
# user's default data directory.
STORAGE_FLAGS = frozenset({"--aws", "--data-dir", "--in-memory"})
DSAWS_SERVE = ("durable_streams_aws.core.cli", "serve")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def names_storage(args: Sequence[str]) -> bool:
    """Whether `dsaws serve` arguments say where its data goes."""
    return not STORAGE_FLAGS.isdisjoint(args)


def python_module(module: Sequence[str], port: int, *args: str) -> list[str]:
    """The command that runs `python -m <module...> --port <port> <args>` in this interpreter."""
    return [sys.executable, "-m", *module, "--port", str(port), *args]


def answers(url: str) -> Callable[[], bool]:
    """A readiness check: `url` answers at all (any status)."""

    def check() -> bool:
        httpx.get(url, timeout=2)
        return True

    return check


class ChildProcess:
    """`command` in a process of its own, run from the repository's root. Its output goes to a
    temporary file, not a pipe: nobody reads it while it runs, and a full pipe would block the
    child on its next line. `stop` ends it (and may be called again)."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.command = command
        self.env = {**os.environ, **(env or {})}
        self.output = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop)
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, ready: Callable[[], bool], within: float = 60, poll: float = 0.1) -> None:
        """Starts the command; returns once `ready()` is true (an `httpx.HTTPError` counts as
        not yet). RuntimeError with the end of its output if it exits first; if it is not
        ready `within` seconds, it is stopped and RuntimeError."""
        self.popen = subprocess.Popen(
            self.command, cwd=ROOT, env=self.env, stdout=self.output, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + within
        while True:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{shlex.join(self.command)} exited:\n{self.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if ready():
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{shlex.join(self.command)} did not come up in {within:g} s")
            time.sleep(poll)

    def log(self, last: int = 8000) -> str:
        """The end of what the child has printed so far."""
        self.output.seek(0)
        return self.output.read().decode(errors="replace")[-last:]

    def stop(self, grace: float = 10) -> None:
        """SIGTERM, and SIGKILL if it has not ended `grace` seconds later."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.output.close()

    def kill(self) -> None:
        """SIGKILL: the child gets no chance to flush or close anything."""
        assert self.popen is not None
        self.popen.kill()
        self.popen.wait()


@contextlib.contextmanager
def process(
    command: list[str], ready_url: str, env: dict[str, str] | None = None
) -> Iterator[ChildProcess]:
    """Run `command` until the block ends; ready once `ready_url` answers (any status)."""
    child = ChildProcess(command, env)
    try:
        child.start(answers(ready_url))
        yield child
    finally:
        child.stop()


@contextlib.contextmanager
def dsaws_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`dsaws serve` with `args`; yields its streams' base URL. Unless `args` say where its
    data goes, the embedded server journals to a fresh directory, removed afterwards (never the
    user's default one)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        if not names_storage(args):
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="dsaws-bench-"))
            args = (*args, "--data-dir", data_dir)
        with process(python_module(DSAWS_SERVE, port, *args), f"{base}/healthz", env):
            yield f"{base}/v1/stream"


@contextlib.contextmanager
def counted_emulator(
    latency_ms: tuple[float, float] | None = None, dynamodb_local: bool = False
) -> Iterator[str]:
    """`benchmarks.counted_emulator` in its own process (every call taking between the two
    `latency_ms` bounds; DynamoDB's passed on to DynamoDB Local with `dynamodb_local`); yields
    its endpoint."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    options = [] if latency_ms is None else ["--latency", f"{latency_ms[0]},{latency_ms[1]}"]
    if dynamodb_local:
        options.append("--dynamodb-local")
    with process(
        python_module(["benchmarks.counted_emulator"], port, *options), f"{endpoint}/__calls"
    ):
        yield endpoint


@contextlib.contextmanager
def reference_server() -> Iterator[tuple[str, str]]:
    """The reference server (npm @durable-streams/server, pinned in benchmarks/node, in
    memory) in a Node process of its own; yields its streams' base URL and a description."""
    node = find_node()
    work = install_node_project(ROOT / "benchmarks" / "node", CACHE / "reference-server")
    installed = work / "node_modules" / "@durable-streams" / "server" / "package.json"
    version = json.loads(installed.read_text())["version"]
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    command = [node, str(work / "reference_server.mjs"), "--port", str(port)]
    with process(command, f"{root}/"):  # ready once it answers at all (404 here)
        yield f"{root}/v1/stream", f"npm @durable-streams/server {version}, in memory"
