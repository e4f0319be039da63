"""Hand botocore's requests to the emulator's WSGI app directly, in this process.

The clients sign (unless made unsigned for the emulator: `AwsSettings.lean_emulator_dynamodb`),
serialise, retry and parse exactly as they do against AWS: only the socket is gone. botocore's
`before-send` event lets a handler answer a prepared request itself; this one turns the request
into a WSGI environ, calls the app and wraps what it answered.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse, HeadersDict

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Body(io.BytesIO):
    """What botocore reads a response from: a stream, whole or in chunks."""

    def stream(self, **_: Any) -> Iterable[bytes]:
        while chunk := self.read(1 << 20):
            yield chunk


def _request_body(request: AWSPreparedRequest) -> bytes:
    body = request.body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    return body.read()  # a file-like body (S3 uploads)


def wsgi_environ(request: dict[str, str], body: bytes, url_scheme: str = "http") -> dict[str, Any]:
    """The environ a WSGI app is called with, for a request given by its CGI variables
    (`REQUEST_METHOD`, `PATH_INFO`, `HTTP_*`, ...; the server's own are derived from
    `HTTP_HOST` where missing) and its body."""
    host, _, port = request.get("HTTP_HOST", "localhost").partition(":")
    return {
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "SERVER_NAME": host,
        "SERVER_PORT": port or ("443" if url_scheme == "https" else "80"),
        "SERVER_PROTOCOL": "HTTP/1.1",
        **request,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url_scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }


def status_code(status: str) -> int:
    """The code of a WSGI status line (`"200 OK"`)."""
    return int(status.split(" ", 1)[0])


def _environ(request: AWSPreparedRequest, body: bytes) -> dict[str, Any]:
    url = urlsplit(request.url)
    variables = {
        "REQUEST_METHOD": request.method,
        # PEP 3333: the path is unquoted, its bytes carried as latin-1.
        "PATH_INFO": unquote_to_bytes(url.path or "/").decode("latin-1"),
        # As werkzeug's server sets it: moto takes S3 keys from the path as sent.
        "RAW_URI": (url.path or "/") + (f"?{url.query}" if url.query else ""),
        "QUERY_STRING": url.query,
        "HTTP_HOST": url.netloc,
    }
    for name, value in request.headers.items():
        text = value.decode() if isinstance(value, bytes) else value
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            variables[key] = text
        else:
            variables[f"HTTP_{key}"] = text
    return wsgi_environ(variables, body, url.scheme)


class InProcessTransport:
    """A `before-send` handler that answers every request of a client from `app`."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app

    def attach(self, client: Any) -> Any:
        """Route every request of a boto3 `client` to the app; returns the client."""
        client.meta.events.register_first("before-send", self)
        return client

    def __call__(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        body = _request_body(request)
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
            answer["status"] = status_code(status)
            answer["headers"] = HeadersDict(headers)

        content = b"".join(self._app(_environ(request, body), start_response))
        return AWSResponse(request.url, answer["status"], answer["headers"], _Body(content))
