"""The pipeline's urllib3 transport answers as httpx's own does: the same bodies, statuses and
headers, bodies of unknown length handed on as they arrive, the errors the client's retries
tell apart, a connection left with part of a body unread not used again, and httpx's own
transport where the environment names a proxy."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, SSLError

from durable_streams_aws.pipeline._transport import Urllib3Transport, bulk_transport, translated

BIG = bytes(range(256)) * 40_000  # 10 MB
# Set by a test once it has the first piece of a body: only then is the rest sent.
RELEASE = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(200, b"", length=len(BIG))

    def do_GET(self) -> None:
        if self.path == "/big":
            self._answer(200, BIG)
        elif self.path == "/missing":
            self._answer(404, b'{"error": "no such stream"}')
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b"event: data\n", b"data: [1]\n\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                RELEASE.wait(10)  # a live read's next event comes later
            self.wfile.write(b"0\r\n\r\n")
        elif (
            self.path == "/until-close"
        ):  # neither a length nor chunks: it ends with the connection
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"data: first\n\n")
            self.wfile.flush()
            RELEASE.wait(10)
            self.wfile.write(b"data: second\n\n")
            self.close_connection = True
        elif self.path == "/latin":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.send_header("X-Name", "café")
            self.end_headers()
        elif self.path == "/slow":
            time.sleep(1.0)
            self._answer(200, b"late")
        elif self.path == "/connection":
            port = self.client_address[1]
            self._answer(200, str(port).encode())
        else:
            self._answer(400, b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(200, body[::-1], extra=[("Stream-Next-Offset", "a"), ("Set-Cookie", "b")])

    def _answer(
        self,
        status: int,
        body: bytes,
        length: int | None = None,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("Set-Cookie", "a")
        for name, value in extra or []:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up on an answer (the timeout test's) is expected


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(transport=Urllib3Transport(), timeout=httpx.Timeout(5.0)) as made:
        yield made


def test_a_body_of_known_length_is_read_whole(server: str, client: httpx.Client) -> None:
    answer = client.get(f"{server}/big")
    assert answer.status_code == 200
    assert answer.content == BIG
    assert answer.headers["content-length"] == str(len(BIG))


def test_head_and_error_statuses_come_back_as_they_are(server: str, client: httpx.Client) -> None:
    head = client.head(f"{server}/big")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(BIG))
    missing = client.get(f"{server}/missing")
    assert missing.status_code == 404
    assert missing.json() == {"error": "no such stream"}


def test_a_request_body_and_repeated_headers_go_through(server: str, client: httpx.Client) -> None:
    answer = client.post(f"{server}/echo", content=b"abc")
    assert answer.content == b"cba"
    assert answer.headers.get_list("set-cookie") == ["a", "b"]
    assert answer.headers["stream-next-offset"] == "a"


@pytest.mark.parametrize("path", ["/chunked", "/until-close"])
def test_a_body_of_unknown_length_is_handed_on_as_it_arrives(
    server: str, client: httpx.Client, path: str
) -> None:
    RELEASE.clear()
    with client.stream("GET", f"{server}{path}") as answer:
        pieces = answer.iter_raw()
        first = next(pieces)  # before the server has sent the rest: it waits for this
        RELEASE.set()
        rest = b"".join(pieces)
    assert first in (b"event: data\n", b"data: first\n\n")
    assert first + rest in (b"event: data\ndata: [1]\n\n", b"data: first\n\ndata: second\n\n")


def test_header_bytes_come_back_as_sent(server: str, client: httpx.Client) -> None:
    assert client.get(f"{server}/latin").headers["x-name"] == "café"


def test_connections_are_kept_and_one_left_unread_is_not_reused(
    server: str, client: httpx.Client
) -> None:
    ports = {client.get(f"{server}/connection").text for _ in range(3)}
    assert len(ports) == 1  # one connection served all three
    with client.stream("GET", f"{server}/big") as answer:
        next(answer.iter_raw())  # the first of 10 MB (in one read), then given up on
    RELEASE.clear()
    with client.stream("GET", f"{server}/chunked") as answer:
        first = next(answer.iter_raw())
    assert first.startswith(b"event")
    RELEASE.set()
    # The rest of the chunked body was never read: the next call must not see it.
    assert client.get(f"{server}/big").content == BIG
    assert client.post(f"{server}/echo", content=b"xy").content == b"yx"


def test_a_refused_connection_is_a_connect_error(client: httpx.Client) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        client.get(f"http://127.0.0.1:{port}/")


def test_a_slow_answer_is_a_read_timeout(server: str) -> None:
    hurried = httpx.Client(transport=Urllib3Transport(), timeout=httpx.Timeout(0.2))
    with hurried, pytest.raises(httpx.ReadTimeout):
        hurried.get(f"{server}/slow")


def test_only_failures_before_anything_was_sent_are_connect_errors() -> None:
    refused = SSLError(ssl.SSLCertVerificationError("certificate verify failed"))
    assert translated(refused) is httpx.ConnectError
    assert translated(NewConnectionError(None, "refused")) is httpx.ConnectError
    assert translated(ConnectTimeoutError("slow to connect")) is httpx.ConnectTimeout
    # A TLS record gone bad may come after the request went out: maybe delivered.
    assert translated(SSLError(ssl.SSLError("bad record mac"))) is httpx.ReadError


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def test_httpx_s_own_transport_where_the_environment_names_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert isinstance(bulk_transport(), Urllib3Transport)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    assert bulk_transport() is None  # httpx's own transport, which goes through the proxy
