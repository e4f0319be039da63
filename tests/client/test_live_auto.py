"""`live="auto"`: catch up, then follow by SSE where SSE keeps every byte, by long-poll
otherwise, and by long-poll from where SSE stopped when SSE proves unusable (refused, or cut
short again and again). Giving SSE up must never end the read: only the stream's close does.
Each reading test runs against the sync client and the async one."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from flavours import StreamOpener
from scripted import FAST, offset

from durable_streams_aws.client import (
    Batch,
    Offset,
    Unavailable,
)
from durable_streams_aws.client._live import SSE_REFUSALS, Connection, SseHealth, live_transport

URL = "http://server.test/v1/stream/s"


# ---------------------------------------------------------------- pure decisions


@pytest.mark.parametrize(
    ("content_type", "transport"),
    [
        ("application/json", "sse"),
        ("application/json; charset=utf-8", "sse"),
        ("APPLICATION/JSON", "sse"),
        ("application/octet-stream", "sse"),
        ("image/png", "sse"),
        ("text/plain", "long-poll"),
        ("text/csv; charset=utf-8", "long-poll"),
        ("Text/Markdown", "long-poll"),
        ("", "sse"),
        (None, "sse"),
    ],
)
def test_sse_only_where_it_carries_the_bytes_exactly(
    content_type: str | None, transport: str
) -> None:
    assert live_transport(content_type) == transport


@pytest.mark.parametrize(
    ("seconds", "told", "progressed", "verdict"),
    [
        (0.01, False, True, Connection.PROGRESSED),
        (0.01, True, True, Connection.PROGRESSED),
        (9.0, True, True, Connection.PROGRESSED),
        (0.01, True, False, Connection.SHORT),  # announced where it stands, then ended at once
        (0.01, False, False, Connection.SHORT),
        (9.0, True, False, Connection.ALIVE),  # an idle stream: nothing to move on to
        (9.0, False, False, Connection.QUIET),  # lasted, yet not one event got through
    ],
)
def test_how_a_connection_is_judged(
    seconds: float, told: bool, progressed: bool, verdict: Connection
) -> None:
    assert SseHealth().connection_ended(seconds, told, progressed) is verdict


def test_connections_that_get_nowhere_in_a_row_give_sse_up() -> None:
    health = SseHealth(max_short=3, min_seconds=0.5)
    for nowhere in [(0.01, True, False), (9.0, False, False), (0.01, False, False)]:
        assert not health.given_up
        health.connection_ended(*nowhere)
    assert health.given_up


@pytest.mark.parametrize("healthy", [(0.01, False, True), (9.0, True, False)])
def test_a_healthy_connection_resets_the_count(healthy: tuple[float, bool, bool]) -> None:
    health = SseHealth(max_short=3, min_seconds=0.5)
    for _ in range(10):
        health.connection_ended(0.01, True, False)
        health.connection_ended(9.0, False, False)
        health.connection_ended(*healthy)
        assert not health.given_up


@pytest.mark.parametrize("status", range(400, 600))
def test_only_answers_that_mean_no_sse_here_are_refusals(status: int) -> None:
    assert SseHealth().refused(status) == (status in {400, 405, 406, 415, 501})
    assert set(range(400, 600)) >= SSE_REFUSALS


# ---------------------------------------------------------------- a scripted server


class FakeJsonStream:
    """A JSON stream that already holds `held` messages; each live request (long-poll, or an
    SSE connection that works) sees the next of `arriving`, and once they are all out, the
    close. `sse` says what SSE requests get: "works", "refused" (405), "cut" (an event
    stream that ends at once without an event), "announce-only" (a control event where the
    stream stands, then the end), "quiet" (an event stream that lasts without an event); the
    first `down` SSE requests find no server at all."""

    def __init__(self, held: list[object], arriving: list[object], sse: str, down: int = 0) -> None:
        self.messages = list(held)
        self.arriving = list(arriving)
        self.closed = False
        self.sse = sse
        self.down = down
        self.seen: list[dict[str, str]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        self.seen.append(params)
        if request.method == "HEAD":
            return httpx.Response(200, headers=self._headers(len(self.messages)))
        start = int(params["offset"].split("_")[1]) if params["offset"] != "-1" else 0
        live = params.get("live")
        if live == "sse":
            return self._sse(start)
        if live == "long-poll" and start == len(self.messages):
            self._arrive()
        body = json.dumps(self.messages[start:]).encode()
        status = 204 if live and start == len(self.messages) else 200
        headers = self._headers(len(self.messages)) | {"Stream-Up-To-Date": "true"}
        return httpx.Response(status, content=b"" if status == 204 else body, headers=headers)

    def _arrive(self) -> None:
        if self.arriving:
            self.messages.append(self.arriving.pop(0))
        else:
            self.closed = True

    def _headers(self, position: int) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Stream-Next-Offset": offset(position)}
        if self.closed:
            headers["Stream-Closed"] = "true"
        else:
            headers["Stream-Cursor"] = str(1000 + position)
        return headers

    def _sse(self, start: int) -> httpx.Response:
        if self.down:
            self.down -= 1
            raise httpx.ConnectError("nobody listens")
        if self.sse == "refused":
            return httpx.Response(405, text="no SSE here")
        if self.sse == "quiet":
            time.sleep(SseHealth().min_seconds + 0.05)
        events = b""
        if self.sse in ("works", "announce-only"):
            if start == len(self.messages) and self.sse == "works":
                self._arrive()
            if start < len(self.messages):
                data = json.dumps(self.messages[start:])
                events += f"event: data\ndata:{data}\n\n".encode()
            control: dict[str, object] = {
                "streamNextOffset": offset(len(self.messages)),
                "upToDate": True,
            }
            if self.closed:
                control["streamClosed"] = True
            else:
                control["streamCursor"] = str(2000 + len(self.messages))
            events += f"event: control\ndata:{json.dumps(control)}\n\n".encode()
        return httpx.Response(200, content=events, headers={"Content-Type": "text/event-stream"})


def read_auto(open_stream: StreamOpener, fake: FakeJsonStream, start: Offset) -> list[Batch]:
    stream = open_stream(URL, transport=httpx.MockTransport(fake.handle), retry=FAST)
    return list(stream.read(start, live="auto"))


def messages(batches: list[Batch]) -> list[object]:
    return [m for batch in batches for m in batch.messages or []]


def live_modes(fake: FakeJsonStream) -> list[str | None]:
    return [params.get("live") for params in fake.seen if "offset" in params]


def test_catches_up_then_follows_by_sse_to_the_close(open_stream: StreamOpener) -> None:
    fake = FakeJsonStream(["a", "b"], ["c", "d"], sse="works")
    batches = read_auto(open_stream, fake, Offset.BEGINNING)
    assert messages(batches) == ["a", "b", "c", "d"]
    assert batches[-1].closed and not any(b.closed for b in batches[:-1])
    modes = live_modes(fake)
    assert modes[0] is None and set(modes[1:]) == {"sse"}
    # the catch-up's cursor goes with the first SSE request, each control's with the next
    assert [params.get("cursor") for params in fake.seen[1:]] == ["1002", "2003", "2004"]


@pytest.mark.parametrize("sse", ["refused", "cut", "announce-only", "quiet"])
def test_sse_given_up_goes_on_by_long_poll_to_the_close(
    open_stream: StreamOpener, sse: str
) -> None:
    fake = FakeJsonStream(["a"], ["b", "c", "d"], sse=sse)
    batches = read_auto(open_stream, fake, Offset.BEGINNING)
    assert messages(batches) == ["a", "b", "c", "d"]
    assert batches[-1].closed and not any(b.closed for b in batches[:-1])
    modes = live_modes(fake)
    expected_sse = 1 if sse == "refused" else SseHealth().max_short
    assert modes.count("sse") == expected_sse
    assert modes[-1] == "long-poll" and "long-poll" not in modes[: 1 + expected_sse]


def test_a_closed_stream_ends_after_the_catch_up(open_stream: StreamOpener) -> None:
    fake = FakeJsonStream(["a"], [], sse="works")
    fake.closed = True
    batches = read_auto(open_stream, fake, Offset.BEGINNING)
    assert messages(batches) == ["a"] and batches[-1].closed
    assert live_modes(fake) == [None]


def test_a_live_mode_that_does_not_exist_is_refused(open_stream: StreamOpener) -> None:
    fake = FakeJsonStream([], [], sse="works")
    stream = open_stream(URL, transport=httpx.MockTransport(fake.handle))
    with pytest.raises(ValueError, match="live must be"):
        next(iter(stream.read(live="websocket")))  # type: ignore[arg-type]
    assert fake.seen == []


def test_an_explicit_sse_read_cut_short_again_and_again_fails_within_the_bound(
    open_stream: StreamOpener,
) -> None:
    """Without `auto` there is nothing to fall back to: silent connections count as failures,
    with backoff, up to the retry bound (and a clear error), instead of spinning for ever."""
    fake = FakeJsonStream(["a"], ["b"], sse="cut")
    stream = open_stream(URL, transport=httpx.MockTransport(fake.handle), retry=FAST)
    with pytest.raises(Unavailable, match="ended without an event"):
        list(stream.read(Offset.BEGINNING, live="sse"))
    assert live_modes(fake) == ["sse"] * FAST.max_attempts


def test_a_server_away_for_a_while_is_no_reason_to_give_sse_up(open_stream: StreamOpener) -> None:
    fake = FakeJsonStream(["a"], ["b", "c"], sse="works", down=SseHealth().max_short)
    batches = read_auto(open_stream, fake, Offset.BEGINNING)
    assert messages(batches) == ["a", "b", "c"] and batches[-1].closed
    assert "long-poll" not in live_modes(fake)


def test_after_giving_sse_up_the_last_batch_still_has_its_messages(
    open_stream: StreamOpener,
) -> None:
    fake = FakeJsonStream(["a"], [], sse="refused")  # the first long-poll finds the close
    batches = read_auto(open_stream, fake, Offset.BEGINNING)
    assert batches[-1].closed and batches[-1].messages == []


def test_an_explicit_sse_read_that_gets_nowhere_backs_off_and_fails_within_the_bound(
    open_stream: StreamOpener,
) -> None:
    """A control event where the stream stands, then the end, again and again: not progress."""
    fake = FakeJsonStream(["a"], ["b"], sse="announce-only")
    stream = open_stream(URL, transport=httpx.MockTransport(fake.handle), retry=FAST)
    with pytest.raises(Unavailable):
        list(stream.read(Offset.BEGINNING, live="sse"))
    # the first connection moves from the start to where the stream stands; then nowhere
    assert live_modes(fake) == ["sse"] * (1 + FAST.max_attempts)
