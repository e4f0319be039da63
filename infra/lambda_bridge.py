"""The Lambda path, locally: HTTP in, Function URL events (payload 2.0) to the real handler.

Each request becomes the event a Lambda Function URL would deliver (headers lower-cased and
comma-joined, the raw query string, a base64 body for binary content), is passed to
`functions.api.handler` in this process, and the handler's answer is written back. The app
runs in bounded-window SSE mode, as it does inside Lambda.

    python -m durable_streams_aws.infra.lambda_bridge --port 4438 [--long-poll-timeout 1]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from durable_streams_aws.functions.events import LambdaContext, function_url_event

__all__ = ["LambdaContext", "function_url_event", "lambda_environment", "make_request_handler"]

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def lambda_environment(endpoint: str, table: str, bucket: str) -> dict[str, str]:
    """What the API function finds in its environment, pointed at a local emulator."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "emulator"),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "emulator"),
        "AWS_LAMBDA_FUNCTION_NAME": "dsaws-local",
        "DS_TABLE": table,
        "DS_BUCKET": bucket,
        "DS_FUNCTION_TIMEOUT": "30",  # as LambdaContext's deadline
        "POWERTOOLS_METRICS_NAMESPACE": "DurableStreams",
        "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
    }


def make_request_handler(handler: Handler) -> type[BaseHTTPRequestHandler]:
    class BridgeRequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in separate writes; with Nagle's algorithm on, the body would
        # wait for the client's delayed ACK (tens of milliseconds per response).
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                pieces = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(pieces)
                    pieces.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("content-length") or 0)
            return self.rfile.read(length) if length else b""

        def _invoke(self) -> None:
            body = self._body()
            headers = [(k, v) for k, v in self.headers.items() if k.lower() != "transfer-encoding"]
            # The bridge is plain http: the URLs the app hands out must say so.
            event = function_url_event(
                self.command, self.path, headers, body, self.client_address[0], scheme="http"
            )
            # Mangum runs the app on the thread's event loop, as Lambda runs one per process.
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                result = handler(event, LambdaContext())
            finally:
                loop.close()
                asyncio.set_event_loop(None)
            payload = result.get("body") or ""
            data = (
                base64.b64decode(payload)
                if result.get("isBase64Encoded")
                else payload.encode("utf-8")
            )
            self.send_response(int(result.get("statusCode", 200)))
            for name, value in (result.get("headers") or {}).items():
                if name.lower() not in {"content-length", "transfer-encoding", "connection"}:
                    self.send_header(name, value)
            for cookie in result.get("cookies") or []:
                self.send_header("set-cookie", cookie)
            # Event streams go out chunked, the way a front door relays them; everything else
            # with its length.
            chunked = (
                (result.get("headers") or {})
                .get("content-type", "")
                .startswith("text/event-stream")
            )
            if chunked:
                self.send_header("transfer-encoding", "chunked")
            else:
                self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if chunked:
                if data:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = _invoke

    return BridgeRequestHandler


def serve(handler: Handler, host: str, port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), make_request_handler(handler))
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4438)
    parser.add_argument("--long-poll-timeout", type=float, default=1.0)
    args = parser.parse_args(argv)

    from durable_streams_aws.core.config import Settings, load_settings
    from durable_streams_aws.core.runtime import (
        build_backend,
        ensure_resources,
        use_emulator_credentials,
    )
    from durable_streams_aws.infra.emulator import Emulator

    use_emulator_credentials()
    emulator = Emulator().start()
    defaults = Settings()
    os.environ.update(lambda_environment(emulator.endpoint, defaults.table, defaults.bucket))
    os.environ["DS_LONG_POLL_TIMEOUT"] = str(args.long_poll_timeout)
    ensure_resources(build_backend(load_settings(), endpoint=emulator.endpoint))
    from durable_streams_aws.functions.api import handler

    server = serve(handler, args.host, args.port)
    print(
        f"lambda bridge: http://{args.host}:{args.port}/v1/stream/ -> functions.api.handler",
        flush=True,
    )
    try:
        server.serve_forever()
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
