"""SSE under a real uvicorn server: disconnects leave nothing running; lifetime and window."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from support import free_port, sse_value

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.runtime import Backend

URL = "/v1/stream/sse"


class InProcessServer:
    def __init__(self, app: object) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> InProcessServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def _serve(backend: Backend, **settings: object) -> Iterator[tuple[InProcessServer, object]]:
    configured = backend.settings.model_copy(update=settings)
    app = create_app(configured, backend.store)
    with InProcessServer(app) as server:
        yield server, app.state.endpoints


@pytest.fixture
def streaming(backend: Backend) -> Iterator[tuple[InProcessServer, object]]:
    yield from _serve(backend, sse_lifetime=30.0, poll_interval=0.05)


def _wait_until(condition, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_disconnected_clients_leave_no_session_or_waiter(streaming) -> None:  # type: ignore[no-untyped-def]
    server, endpoints = streaming
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        created = client.put(URL, headers={"Content-Type": "text/plain"}, content=b"hello")
        tail = created.headers["stream-next-offset"]
        for offset in ("-1", tail, tail, "now", "-1"):
            with client.stream("GET", URL, params={"offset": offset, "live": "sse"}) as resp:
                assert resp.status_code == 200
                received = b""
                for piece in resp.iter_bytes():
                    received += piece
                    if b'"upToDate":true' in received:
                        break
            # Leaving the block closed the connection while the session waited at the tail.
        assert _wait_until(lambda: endpoints.sse.active == 0), "an SSE session outlived its client"
        assert _wait_until(lambda: endpoints.wakeups.pending() == 0), "a waiter was left behind"
        # The server still serves new sessions normally afterwards.
        client.post(URL, headers={"Content-Type": "text/plain"}, content=b" world")
        fresh = client.get(URL, params={"offset": "-1"})
        assert fresh.content == b"hello world"


def test_live_session_receives_appends_then_the_close(streaming) -> None:  # type: ignore[no-untyped-def]
    server, endpoints = streaming
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        created = client.put(URL, headers={"Content-Type": "text/plain"})
        tail = created.headers["stream-next-offset"]

        def write_later() -> None:
            time.sleep(0.3)
            client.post(URL, headers={"Content-Type": "text/plain"}, content=b"one\ntwo")
            client.post(
                URL,
                headers={"Content-Type": "text/plain", "Stream-Closed": "true"},
                content=b"last",
            )

        writer = threading.Thread(target=write_later)
        writer.start()
        with client.stream("GET", URL, params={"offset": tail, "live": "sse"}) as resp:
            body = resp.read()  # the server ends the stream after the closed control event
        writer.join()
        events = [block for block in body.decode().split("\n\n") if block]
        payloads = [
            "\n".join(sse_value(line) for line in event.splitlines()[1:])
            for event in events
            if event.startswith("event: data")
        ]
        # However the appends were batched into events, every byte arrives, in order, and the
        # closed signal comes last.
        assert "".join(payloads) == "one\ntwolast"
        assert '"streamClosed":true' in events[-1] and events[-1].startswith("event: control")
        assert all('"streamClosed"' not in event for event in events[:-1])
    assert _wait_until(lambda: endpoints.sse.active == 0)


def test_stream_ends_after_its_lifetime(backend: Backend) -> None:
    for server, endpoints in _serve(backend, sse_lifetime=0.5, poll_interval=0.05):
        with httpx.Client(base_url=server.base_url, timeout=10) as client:
            client.put(URL, headers={"Content-Type": "text/plain"})
            started = time.monotonic()
            with client.stream("GET", URL, params={"offset": "now", "live": "sse"}) as resp:
                body = resp.read()
            assert time.monotonic() - started < 3
            assert b'"upToDate":true' in body
        assert endpoints.sse.active == 0


def test_window_mode_returns_with_data_or_at_the_window_end(backend: Backend) -> None:
    for server, _ in _serve(backend, sse_mode="window", sse_window=0.5, poll_interval=0.05):
        with httpx.Client(base_url=server.base_url, timeout=10) as client:
            created = client.put(
                URL, headers={"Content-Type": "application/octet-stream"}, content=b"\x00\x01"
            )
            tail = created.headers["stream-next-offset"]
            catch_up = client.get(URL, params={"offset": "-1", "live": "sse"})
            assert catch_up.headers["stream-sse-data-encoding"] == "base64"
            assert (
                catch_up.text
                == (
                    "event: data\ndata:AAE=\n\nevent: control\n"
                    f'data:{{"streamNextOffset":"{tail}","streamCursor":'
                )
                + catch_up.text.split('"streamCursor":', 1)[1]
            )
            started = time.monotonic()
            idle = client.get(URL, params={"offset": tail, "live": "sse"})
            waited = time.monotonic() - started
            assert 0.4 < waited < 3
            assert idle.text.count("event: control") == 1 and "event: data" not in idle.text

            def append_soon() -> None:
                time.sleep(0.2)
                client.post(
                    URL,
                    headers={"Content-Type": "application/octet-stream", "Stream-Closed": "true"},
                    content=b"\xff",
                )

            writer = threading.Thread(target=append_soon)
            writer.start()
            woken = client.get(URL, params={"offset": tail, "live": "sse"})
            writer.join()
            assert "data:/w==" in woken.text and '"streamClosed":true' in woken.text
