"""The front door of `dsaws serve` against clients that misbehave: huge or endless heads,
trickling bodies, transfer codings it cannot decode, clients that leave, and more connections
than it serves. Timings use an in-process server with short limits; what `dsaws serve` itself
enforces is checked on a real `dsaws serve` process."""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from support import ServerProcess

from benchmarks._processes import free_port
from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.front_door import FrontDoorLimits, bounded_protocol
from durable_streams_aws.core.runtime import Backend

STREAM = "/v1/stream/door"
SHORT = FrontDoorLimits(head_timeout=0.5, body_idle_timeout=0.5)


@contextmanager
def serving(app: Any, limits: FrontDoorLimits = SHORT) -> Iterator[int]:
    """uvicorn with the front door's protocol, in a thread of this process."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=bounded_protocol(limits),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def answer(sock: socket.socket, within: float = 5.0) -> bytes:
    """Everything the server sends until it closes the connection (or `within` passes)."""
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return received


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0


def flood(sock: socket.socket, head: bytes, filler: bytes, most: int) -> tuple[int, bytes]:
    """Send `head`, then `filler` again and again until the server answers or `most` bytes
    went; how many were sent, and the answer."""
    sock.sendall(head)
    sent = len(head)
    received = b""
    try:
        while sent < most:
            sock.sendall(filler)
            sent += len(filler)
            if select.select([sock], [], [], 0)[0]:
                received = sock.recv(65536)
                break
    except (BrokenPipeError, ConnectionResetError):
        pass
    return sent, received + answer(sock, 2)


@pytest.fixture
def app(backend: Backend) -> Any:
    settings = backend.settings.model_copy(update={"long_poll_timeout": 30.0})
    return create_app(settings, backend.store)


# ---------------------------------------------------------------- heads


@pytest.fixture(scope="module")
def dsaws_serve() -> Iterator[ServerProcess]:
    with ServerProcess("--long-poll-timeout", "30", "--max-connections", "8") as server:
        httpx.put(server.base_url + STREAM, headers={"Content-Type": "text/plain"}, content=b"a")
        yield server


@pytest.mark.parametrize(
    ("name", "head", "filler", "refused"),
    [
        # A 50 MB header (a 26 MB bearer token took 5.9 s to refuse, after being read whole).
        ("one huge header", b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Big: ", b"x" * 65536, 431),
        (
            "a huge token",
            b"GET /v1/stream/door HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ",
            b"A" * 65536,
            431,
        ),
        (
            "many headers",
            b"GET /healthz HTTP/1.1\r\nHost: a\r\n",
            b"X-H: " + b"h" * 995 + b"\r\n",
            431,
        ),
        ("a huge URL", b"GET /v1/stream/", b"u" * 65536, 414),
    ],
)
def test_heads_past_the_limits_are_refused_before_they_are_read_whole(
    dsaws_serve: ServerProcess, name: str, head: bytes, filler: bytes, refused: int
) -> None:
    with connect(dsaws_serve.port) as sock:
        started = time.monotonic()
        sent, response = flood(sock, head, filler, 50 * 1024 * 1024)
        took = time.monotonic() - started
    assert status(response) == refused, (name, response[:200])
    assert b"no-store" in response and b"connection: close" in response
    # Refused within the first chunks past the limit: never the whole 50 MB.
    assert sent < 4 * 1024 * 1024, f"{name}: {sent} bytes went in before the refusal"
    assert took < 3, f"{name}: {took:.1f} s"
    # The server goes on serving.
    assert httpx.get(dsaws_serve.base_url + "/healthz").status_code == 200


def test_one_header_line_is_bounded_and_a_normal_head_passes(dsaws_serve: ServerProcess) -> None:
    base = dsaws_serve.base_url
    assert httpx.get(f"{base}/healthz", headers={"X-Ok": "o" * 7000}).status_code == 200
    assert httpx.get(f"{base}/healthz", headers={"X-Big": "b" * 9000}).status_code == 431
    sixty = {f"X-H{i}": "h" * 900 for i in range(60)}  # 55 KB in all: under 64 KiB
    assert httpx.get(f"{base}/healthz", headers=sixty).status_code == 200
    seventy = {f"X-H{i}": "h" * 990 for i in range(70)}
    assert httpx.get(f"{base}/healthz", headers=seventy).status_code == 431


def test_bodies_on_a_kept_alive_connection_are_never_counted_as_heads(
    dsaws_serve: ServerProcess,
) -> None:
    """A body read in several pieces, the last of which ends its message, followed by more
    requests on the same connection (as nginx sends them): all served."""
    url = dsaws_serve.base_url + "/v1/stream/kept-alive"
    with httpx.Client() as client:
        assert client.put(url, headers={"Content-Type": "text/plain"}).status_code == 201
        for size in (1_000_003, 70_001, 3_000_017, 10):
            posted = client.post(url, headers={"Content-Type": "text/plain"}, content=b"b" * size)
            assert posted.status_code == 204, posted.text
            assert client.get(dsaws_serve.base_url + "/healthz").status_code == 200


def test_transfer_codings_other_than_chunked_are_not_implemented(
    dsaws_serve: ServerProcess,
) -> None:
    """`gzip, chunked` was accepted and the body stored still gzipped."""
    url = dsaws_serve.base_url + STREAM
    before = httpx.get(url, params={"offset": "-1"}).content
    # (httptools refuses `chunked, chunked` and a lone `gzip` itself, as malformed: 400.)
    for coding in (b"gzip, chunked", b"deflate,chunked", b"x-custom, CHUNKED"):
        with connect(dsaws_serve.port) as sock:
            sock.sendall(
                b"POST /v1/stream/door HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
                b"Transfer-Encoding: " + coding + b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            )
            response = answer(sock)
        assert status(response) == 501, (coding, response)
    chunked = httpx.post(url, content=iter([b"b", b"c"]), headers={"Content-Type": "text/plain"})
    assert chunked.status_code == 204
    assert httpx.get(url, params={"offset": "-1"}).content == before + b"bc"


def test_connections_past_the_limit_are_answered_503(dsaws_serve: ServerProcess) -> None:
    """`--max-connections 8`: long-polls hold their connections; the ninth request is refused
    at once, and served again when they end."""
    base = dsaws_serve.base_url
    tail = httpx.head(base + STREAM).headers["stream-next-offset"]
    held = []
    for _ in range(8):
        sock = connect(dsaws_serve.port)
        sock.sendall(
            f"GET {STREAM}?offset={tail}&live=long-poll HTTP/1.1\r\nHost: a\r\n\r\n".encode()
        )
        held.append(sock)
    time.sleep(0.5)
    try:
        assert httpx.get(f"{base}/healthz").status_code == 503
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 5
    while httpx.get(f"{base}/healthz").status_code != 200:
        assert time.monotonic() < deadline, "the server never served again"
        time.sleep(0.1)


# ---------------------------------------------------------------- slow clients


def test_a_head_that_stops_arriving_is_answered_408_and_closed(app: Any) -> None:
    with serving(app) as port, connect(port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        started = time.monotonic()
        response = answer(sock)
        assert status(response) == 408, response
        assert time.monotonic() - started < 3


def test_a_connection_that_sends_nothing_is_closed(app: Any) -> None:
    with serving(app) as port, connect(port) as sock:
        started = time.monotonic()
        assert answer(sock) == b""
        assert time.monotonic() - started < 3


def test_a_body_that_stops_arriving_is_answered_408_and_nothing_is_stored(app: Any) -> None:
    with serving(app) as port:
        url = f"http://127.0.0.1:{port}{STREAM}"
        httpx.put(url, headers={"Content-Type": "text/plain"}, content=b"kept")
        with connect(port) as sock:
            sock.sendall(
                b"POST /v1/stream/door HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
                b"Content-Length: 100\r\n\r\nonly ten b"
            )
            started = time.monotonic()
            response = answer(sock)
            assert status(response) == 408, response
            assert time.monotonic() - started < 3
        assert httpx.get(url, params={"offset": "-1"}).content == b"kept"
        # A body that keeps coming, however slowly, is not cut.
        with connect(port) as sock:
            sock.sendall(
                b"POST /v1/stream/door HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
                b"Content-Length: 6\r\n\r\n"
            )
            for byte in b"slow..":
                time.sleep(0.2)
                sock.sendall(bytes([byte]))
            assert status(answer(sock, 2)) == 204
        assert httpx.get(url, params={"offset": "-1"}).content == b"keptslow.."


def test_a_client_that_leaves_mid_body_is_one_log_line(
    app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dsaws")
    with serving(app, FrontDoorLimits()) as port:
        url = f"http://127.0.0.1:{port}{STREAM}"
        httpx.put(url, headers={"Content-Type": "text/plain"}, content=b"kept")
        caplog.clear()
        with connect(port) as sock:
            sock.sendall(
                b"POST /v1/stream/door HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
                b"Content-Length: 1000\r\n\r\nthe start"
            )
            time.sleep(0.2)
        deadline = time.monotonic() + 5
        while not any("left before its body" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
        assert httpx.get(url, params={"offset": "-1"}).content == b"kept"
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert problems == [], [r.getMessage() for r in problems]


def test_long_polls_whose_clients_left_stop_waiting(app: Any) -> None:
    """50 long-polls opened and closed at once: the server stops waiting for them, instead of
    polling the store for each until its 30 s budget ends."""
    endpoints = app.state.endpoints
    with serving(app) as port:
        url = f"http://127.0.0.1:{port}{STREAM}"
        httpx.put(url, headers={"Content-Type": "text/plain"}, content=b"x")
        tail = httpx.head(url).headers["stream-next-offset"]
        request = f"GET {STREAM}?offset={tail}&live=long-poll HTTP/1.1\r\nHost: a\r\n\r\n"
        sockets = [connect(port) for _ in range(50)]
        for sock in sockets:
            sock.sendall(request.encode())
        deadline = time.monotonic() + 5
        while endpoints.long_polls_waiting < 50:
            assert time.monotonic() < deadline, endpoints.long_polls_waiting
            time.sleep(0.02)
        for sock in sockets:
            sock.close()
        deadline = time.monotonic() + 2
        while endpoints.long_polls_waiting:
            assert time.monotonic() < deadline, f"{endpoints.long_polls_waiting} still waiting"
            time.sleep(0.02)
        assert endpoints.wakeups.pending() == 0
        # A long-poll whose client stays still gets its data.
        with httpx.Client() as client:
            waiting = threading.Thread(
                target=lambda: httpx.post(url, content=b"y", headers={"Content-Type": "text/plain"})
            )
            threading.Timer(0.3, waiting.start).start()
            got = client.get(url, params={"offset": tail, "live": "long-poll"}, timeout=10)
        assert got.status_code == 200 and got.content == b"y"
