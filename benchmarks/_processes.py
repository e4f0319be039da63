"""Servers in processes of their own, for benchmarks that must not share a process (or its GIL)
with the clients they measure."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def process(
    command: list[str], ready_url: str, env: dict[str, str] | None = None
) -> Iterator[None]:
    """Run `command` until the block ends; ready once `ready_url` answers (any status)."""
    with tempfile.TemporaryFile() as output:
        child = subprocess.Popen(
            command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=output, stderr=output
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                if child.poll() is not None:
                    output.seek(0)
                    raise RuntimeError(f"{command} exited: {output.read().decode()[-4000:]}")
                try:
                    httpx.get(ready_url, timeout=2)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{command} did not come up in 60 s") from None
                    time.sleep(0.1)
            yield
        finally:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


@contextlib.contextmanager
def dsaws_serve(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`dsaws serve` with `args`; yields its streams' base URL. Unless `args` say where its
    data goes, the embedded server journals to a fresh directory, removed afterwards (never the
    user's default one)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        if not {"--aws", "--data-dir", "--in-memory"}.intersection(args):
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="dsaws-bench-"))
            args = (*args, "--data-dir", data_dir)
        command = [
            sys.executable,
            "-m",
            "durable_streams_aws.core.cli",
            "serve",
            "--port",
            str(port),
            *args,
        ]
        with process(command, f"{base}/healthz", env):
            yield f"{base}/v1/stream"


@contextlib.contextmanager
def counted_emulator(latency_ms: tuple[float, float] | None = None) -> Iterator[str]:
    """`benchmarks.counted_emulator` in its own process (every call taking between the two
    `latency_ms` bounds); yields its endpoint."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "benchmarks.counted_emulator", "--port", str(port)]
    if latency_ms is not None:
        command += ["--latency", f"{latency_ms[0]},{latency_ms[1]}"]
    with process(command, f"{endpoint}/__calls"):
        yield endpoint
