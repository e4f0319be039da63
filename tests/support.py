"""Helpers the integration tests share: a `dsaws serve` process and free ports."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks._processes import (
    DSAWS_SERVE,
    ChildProcess,
    free_port,
    names_storage,
    python_module,
)
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import DynamoStore

ROOT = Path(__file__).resolve().parent.parent
DSAWS_SERVE_MODULE = " ".join(DSAWS_SERVE)


class FakeClock:
    """A clock tests move by hand (`clock.now += 10`), for stores and collectors."""

    def __init__(self, start: float = 1_900_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def store_on(backend: Backend, **options: Any) -> DynamoStore:
    """Another store on the backend's table and bucket, as another Lambda instance would be;
    `options` are DynamoStore's (clock, inline_max_bytes, ...)."""
    return DynamoStore(
        backend.dynamodb, backend.s3, backend.settings.table, backend.settings.bucket, **options
    )


MOTO = "moto"
DYNAMODB_LOCAL = "dynamodb-local"


def webhook_receiver() -> tuple[ThreadingHTTPServer, list[dict[str, Any]]]:
    """A webhook receiver on this machine that acks every wake it is sent (`{"done": true}`),
    and the wakes it received; `server.shutdown()` stops it."""
    wakes: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            wakes.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            answer = b'{"done": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, wakes


def dynamodb_endpoint(request: pytest.FixtureRequest, kind: str) -> str | None:
    """The DynamoDB endpoint of `kind` (see conftest's `dynamodb_kind`); None: the
    emulator's own."""
    if kind == DYNAMODB_LOCAL:
        return str(request.getfixturevalue("dynamodb_local").endpoint)
    return None


def endpoint_env(backend: Backend) -> dict[str, str]:
    """The variables that point a process's boto3 at the backend's S3 and DynamoDB (which may
    be DynamoDB Local rather than the emulator's)."""
    return {
        "AWS_ENDPOINT_URL": str(backend.s3.meta.endpoint_url),
        "AWS_ENDPOINT_URL_DYNAMODB": str(backend.dynamodb.meta.endpoint_url),
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def remove_resources(backend: Backend) -> None:
    """Delete the backend's table, and its bucket with everything in it."""
    table, bucket = backend.settings.table, backend.settings.bucket
    backend.dynamodb.delete_table(TableName=table)
    for page in backend.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            backend.s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})
    backend.s3.delete_bucket(Bucket=bucket)


def run_dsaws(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run a `dsaws` command in a process of its own, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "durable_streams_aws.core.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def dsaws(env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run a `dsaws` command that prints a JSON report (gc, seal), and return the report."""
    run = run_dsaws(env, *args)
    assert run.returncode == 0, run.stderr
    return dict(json.loads(run.stdout))


_INVOKE_FUNCTION = """
import importlib, json, sys
from durable_streams_aws.infra.lambda_bridge import LambdaContext
module, name = sys.argv[1].rsplit(".", 1)
handler = getattr(importlib.import_module(module), name)
for event in json.loads(sys.stdin.read()):
    print("ANSWER " + json.dumps(handler(event, LambdaContext())), flush=True)
"""


def invoke_function(
    handler: str, events: list[dict[str, Any]], env: dict[str, str]
) -> tuple[list[Any], list[str]]:
    """Run a Lambda handler (`module.attribute`) on `events` in a fresh process, as one
    function instance; its answers, and every line it printed (its logs)."""
    run = subprocess.run(
        [sys.executable, "-c", _INVOKE_FUNCTION, handler],
        input=json.dumps(events),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    answers = [json.loads(line[7:]) for line in lines if line.startswith("ANSWER ")]
    return answers, lines


def emf_records(lines: list[str]) -> list[dict[str, Any]]:
    """The CloudWatch EMF lines among what a function printed."""
    records = [json.loads(line) for line in lines if line.startswith("{")]
    return [record for record in records if "_aws" in record]


def values_of(records: list[dict[str, Any]], name: str) -> list[float]:
    """Every value of metric `name` in those lines."""
    found: list[float] = []
    for record in records:
        value = record.get(name)
        if value is not None:
            found.extend(value if isinstance(value, list) else [value])
    return found


class ServerProcess:
    """`dsaws serve` on the embedded emulator (or another server module given by `module`),
    in a child process (benchmarks' `ChildProcess`, as the benchmarks start theirs)."""

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        module: str = DSAWS_SERVE_MODULE,
        with_cdn: bool = False,
        port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.args = args
        # With the local CDN (nginx, started by `dsaws serve --cdn-port`) in front.
        self.cdn_url: str | None = None
        if with_cdn:
            cdn_port = free_port()
            self.cdn_url = f"http://127.0.0.1:{cdn_port}"
            self.args = (*args, "--cdn-port", str(cdn_port))
        # Each embedded server keeps its data in a directory of its own (a journal may have
        # one server only), removed when it stops, unless the test chose where its data goes.
        self._data_dir: tempfile.TemporaryDirectory[str] | None = None
        if module == DSAWS_SERVE_MODULE and not names_storage(self.args):
            self._data_dir = tempfile.TemporaryDirectory(prefix="dsaws-data-")
            self.args = (*self.args, "--data-dir", self._data_dir.name)
        self.child = ChildProcess(python_module(module.split(), self.port, *self.args), env)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.child.popen

    def start(self) -> ServerProcess:
        """Returns once the server (and its CDN) answer `/healthz` with 200, within 30 s."""
        urls = [self.base_url] + ([self.cdn_url] if self.cdn_url else [])

        def healthy() -> bool:
            return all(httpx.get(f"{url}/healthz", timeout=2).status_code == 200 for url in urls)

        self.child.start(healthy, within=30)
        return self

    def log(self) -> str:
        return self.child.log()

    def stop(self) -> None:
        self.child.stop()
        if self._data_dir is not None:
            self._data_dir.cleanup()

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to flush or close anything."""
        self.child.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sse_value(line: str) -> str:
    """A `data:` line's value, as an SSE parser reads it: one space after the colon removed."""
    value = line.split(":", 1)[1]
    return value[1:] if value.startswith(" ") else value
