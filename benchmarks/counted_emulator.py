"""The embedded emulator in a process of its own, counting the AWS calls it answers, so that a
benchmark can count what a separate `dsaws serve --aws` process asks of its storage. With
`--latency`, every call also takes that long (uniformly between the two bounds, in ms, spent
outside moto's lock), as calls to DynamoDB and S3 from inside their region do.

    python -m benchmarks.counted_emulator --port 4566 [--latency 4,12] [--dynamodb-local]

With `--dynamodb-local`, DynamoDB requests are counted (and delayed) here, then passed on to a
DynamoDB Local this process starts and stops; S3 stays the emulator's.

`GET /__calls` answers the counts by operation as JSON; `DELETE /__calls` sets them to zero.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import sys
import threading
import time
from collections import Counter
from typing import Any

from botocore.awsrequest import AWSRequest
from botocore.httpsession import URLLib3Session
from urllib3.connection import HTTPConnection

from durable_streams_aws.infra.dynamodb_local import DynamoDBLocal
from durable_streams_aws.infra.emulator import Emulator

CALLS_PATH = "/__calls"
_S3_OBJECT_OPERATIONS = {
    "GET": "GetObject",
    "PUT": "PutObject",
    "HEAD": "HeadObject",
    "DELETE": "DeleteObject",
}


def operation(environ: dict[str, Any]) -> str:
    """The API operation of one request: DynamoDB names it in X-Amz-Target; S3 requests are
    named by method for objects (path-style: /bucket/key), and as bucket calls otherwise."""
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return str(target).rsplit(".", 1)[-1]
    method = environ["REQUEST_METHOD"]
    is_object = "/" in environ.get("PATH_INFO", "").strip("/")
    if is_object and method in _S3_OBJECT_OPERATIONS:
        return _S3_OBJECT_OPERATIONS[method]
    return f"S3 {method} {'object' if is_object else 'bucket'}"


def forwarding_to(endpoint: str) -> Any:
    """A WSGI app that sends each request on to `endpoint` as it came (DynamoDB Local checks
    no signature), and answers what it answered."""
    # urllib3's own socket options (TCP_NODELAY), as botocore's clients use: without them the
    # request's body waits for the ACK of its headers, 40 ms a call on DynamoDB Local. A
    # connection kept for each of the benchmark's concurrent writers.
    session = URLLib3Session(
        socket_options=HTTPConnection.default_socket_options, max_pool_connections=64
    )

    def forward(environ: dict[str, Any], start_response: Any) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {
            key[5:].replace("_", "-").title(): value
            for key, value in environ.items()
            if key.startswith("HTTP_") and key != "HTTP_HOST"
        }
        headers["Content-Type"] = environ.get("CONTENT_TYPE", "application/x-amz-json-1.0")
        request = AWSRequest(
            method=environ["REQUEST_METHOD"], url=endpoint + "/", data=body, headers=headers
        )
        answer = session.send(request.prepare())
        kept = [
            (name, value)
            for name, value in answer.headers.items()
            if name.lower()
            not in {"content-length", "transfer-encoding", "connection", "server", "date"}
        ]
        content = answer.content
        start_response(f"{answer.status_code} X", [*kept, ("Content-Length", str(len(content)))])
        return [content]

    return forward


class CallCounter:
    def __init__(
        self, app: Any, latency: tuple[float, float] | None = None, dynamodb: Any = None
    ) -> None:
        self.app = app
        self.dynamodb = dynamodb  # DynamoDB's requests go there when given
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.latency = latency  # seconds, lowest and highest

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == CALLS_PATH:
            with self.lock:
                if environ["REQUEST_METHOD"] == "DELETE":
                    self.calls.clear()
                body = json.dumps(dict(self.calls)).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        with self.lock:
            self.calls[operation(environ)] += 1
        if self.latency is not None:
            time.sleep(random.uniform(*self.latency))
        if self.dynamodb is not None and environ.get("HTTP_X_AMZ_TARGET"):
            return self.dynamodb(environ, start_response)
        return self.app(environ, start_response)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--latency", help="LOW,HIGH: milliseconds every call takes (uniformly between them)"
    )
    parser.add_argument(
        "--dynamodb-local", action="store_true", help="DynamoDB on DynamoDB Local, S3 here"
    )
    args = parser.parse_args()
    latency = None
    if args.latency:
        low, high = (float(part) / 1000 for part in args.latency.split(","))
        latency = (low, high)
    # The benchmark ends this process with SIGTERM: exit through the `with` below, so that the
    # DynamoDB Local it started is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with contextlib.ExitStack() as running:
        dynamodb = None
        if args.dynamodb_local:
            dynamodb = forwarding_to(running.enter_context(DynamoDBLocal()).endpoint)
        emulator = running.enter_context(
            Emulator(port=args.port, middleware=lambda app: CallCounter(app, latency, dynamodb))
        )
        print(f"emulator at {emulator.endpoint}", flush=True)
        threading.Event().wait()  # until the benchmark terminates the process


if __name__ == "__main__":
    main()
