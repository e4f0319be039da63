"""The client's pure parts: offsets, retry decisions, reading, and the behaviour of both clients
(sync and async) against scripted servers (httpx.MockTransport) that fail in the ways real ones
do."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from flavours import StreamOpener
from scripted import FAST, offset, scripted

from durable_streams_aws.client import (
    BadRequest,
    DurableStream,
    Offset,
    OutcomeUnknown,
    RetryPolicy,
    StreamClosed,
    StreamConflict,
    StreamGone,
    StreamNotFound,
    Unavailable,
)
from durable_streams_aws.client._attempts import after_answer, after_failure
from durable_streams_aws.client._retry import parse_retry_after
from durable_streams_aws.client._wire import (
    ReadSession,
    append_body,
    append_request,
    close_request,
    read_request,
)

URL = "http://server.test/v1/stream/s"


# ---------------------------------------------------------------- offsets


def test_offsets_order_as_the_protocol_promises() -> None:
    tokens = [offset(p) for p in (10, 2, 300, 0)]
    ordered = sorted(Offset(t) for t in tokens)
    assert [o.token for o in ordered] == sorted(tokens)
    assert Offset(offset(0)) > Offset.BEGINNING
    assert max(Offset(offset(3)), Offset(offset(4))) == Offset(offset(4))


def test_now_has_no_place_in_the_order() -> None:
    with pytest.raises(TypeError):
        _ = Offset(offset(1)) > Offset.NOW


@pytest.mark.parametrize("token", ["", "a,b", "a&b", "a=b", "a?b", "a/b", "x" * 1025])
def test_tokens_that_cannot_be_offsets_are_refused(token: str) -> None:
    with pytest.raises(ValueError):
        Offset(token)


# ---------------------------------------------------------------- retries


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), ("3", 3.0), ("0", 0.0), ("soon", None), ("-1", None)]
)
def test_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_retry_after_as_a_date() -> None:
    assert parse_retry_after("Sun, 22 Nov 2026 12:00:10 GMT", now=1795348800.0) == 10.0


def test_backoff_is_bounded_and_honours_retry_after() -> None:
    policy = RetryPolicy(max_attempts=5, base_delay=0.1, max_delay=2.0)
    assert all(0 <= policy.delay(n) <= min(2.0, 0.1 * 2 ** (n - 1)) for n in range(1, 12))
    assert policy.delay(1, "1") == 1.0
    assert policy.delay(1, "600") == 2.0
    assert [policy.may_retry(n) for n in range(1, 7)] == [True] * 4 + [False] * 2


def answer(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_safe_requests_retry_server_trouble(status: int) -> None:
    step = after_answer(FAST, read_request(Offset.BEGINNING, None, None), 1, answer(status))
    assert step.pause is not None


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_an_append_answered_with_5xx_is_an_unknown_outcome(status: int) -> None:
    step = after_answer(FAST, append_request("text/plain", b"x"), 1, answer(status))
    assert isinstance(step.error, OutcomeUnknown)


def test_an_append_refused_with_429_goes_again() -> None:
    step = after_answer(
        FAST, append_request("text/plain", b"x"), 1, answer(429, {"Retry-After": "0"})
    )
    assert step.pause == 0.0


def test_a_connection_never_made_is_retried_even_for_an_append() -> None:
    failure = httpx.ConnectError("refused")
    assert after_failure(FAST, append_request("text/plain", b"x"), 1, failure).pause is not None


@pytest.mark.parametrize(
    "failure", [httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("cut"), httpx.WriteError("x")]
)
def test_an_append_without_an_answer_is_an_unknown_outcome(failure: httpx.TransportError) -> None:
    step = after_failure(FAST, append_request("text/plain", b"x"), 1, failure)
    assert isinstance(step.error, OutcomeUnknown)
    assert after_failure(FAST, close_request(), 1, failure).pause is not None  # a plain close


def test_retries_end_with_unavailable() -> None:
    step = after_failure(FAST, close_request(), FAST.max_attempts, httpx.ReadTimeout("slow"))
    assert isinstance(step.error, Unavailable)


# ---------------------------------------------------------------- reading


def read_answer(status: int, body: bytes = b"", **headers: str) -> httpx.Response:
    names = {"next": "Stream-Next-Offset", "up": "Stream-Up-To-Date", "closed": "Stream-Closed"}
    names |= {"cursor": "Stream-Cursor", "ctype": "Content-Type"}
    return httpx.Response(status, content=body, headers={names[k]: v for k, v in headers.items()})


def test_a_catch_up_read_ends_when_it_is_up_to_date() -> None:
    session = ReadSession(Offset.BEGINNING, None)
    first = session.accept(read_answer(200, b"ab", next=offset(2), ctype="text/plain"))
    assert first is not None and not session.finished and first.data == b"ab"
    last = session.accept(read_answer(200, b"c", next=offset(3), up="true"))
    assert last is not None and last.up_to_date and not last.closed and session.finished
    assert session.request().params == {"offset": offset(3)}


def test_a_live_read_goes_on_past_up_to_date_and_echoes_cursors() -> None:
    session = ReadSession(Offset(offset(0)), "long-poll")
    session.accept(read_answer(200, b"a", next=offset(1), up="true", cursor="77"))
    assert not session.finished
    assert session.accept(read_answer(204, next=offset(1), up="true", cursor="78")) is None
    assert session.request().params == {"offset": offset(1), "live": "long-poll", "cursor": "78"}


def test_the_end_of_a_closed_stream_is_handed_over_as_a_batch() -> None:
    session = ReadSession(Offset(offset(1)), "long-poll")
    batch = session.accept(read_answer(204, next=offset(1), up="true", closed="true"))
    assert batch is not None and batch.closed and batch.data == b"" and session.finished


@pytest.mark.parametrize(
    ("data", "given", "expected"),
    [
        ([{"a": 1}, "two"], None, ("application/json", b'[{"a":1},"two"]')),
        ("héllo", None, ("text/plain", "héllo".encode())),
        (b"\x00\xff", None, ("application/octet-stream", b"\x00\xff")),
        ("a,b", "text/csv", ("text/csv", b"a,b")),
        (bytearray(b"x"), "image/png", ("image/png", b"x")),
    ],
)
def test_an_appends_body_and_type_follow_from_its_data(
    data: bytes | str | list[object], given: str | None, expected: tuple[str, bytes]
) -> None:
    assert append_body(data, given) == expected


def test_json_batches_carry_python_values() -> None:
    session = ReadSession(Offset.BEGINNING, None)
    body = json.dumps([{"a": 1}, "two", 3]).encode()
    batch = session.accept(
        read_answer(200, body, next=offset(9), up="true", ctype="application/json")
    )
    assert batch is not None and batch.messages == [{"a": 1}, "two", 3]


@pytest.mark.parametrize(
    ("status", "headers", "error"),
    [
        (404, {}, StreamNotFound),
        (410, {}, StreamGone),
        (409, {}, StreamConflict),
        (409, {"Stream-Closed": "true"}, StreamClosed),
        (400, {}, BadRequest),
        (413, {}, BadRequest),
    ],
)
def test_refusals_become_typed_errors(status: int, headers: dict[str, str], error: type) -> None:
    with pytest.raises(error):
        ReadSession(Offset.BEGINNING, None).accept(httpx.Response(status, headers=headers))


# ---------------------------------------------------------------- scripted servers


def fail(exc: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def raise_it(request: httpx.Request) -> httpx.Response:
        raise exc

    return raise_it


def ok(status: int = 204, **headers: str) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, headers=headers)


def on(
    open_stream: StreamOpener, transport: httpx.MockTransport, **options: object
) -> DurableStream:
    return open_stream(URL, transport=transport, retry=FAST, **options)


def test_an_append_that_lost_its_answer_says_so_and_is_not_repeated(
    open_stream: StreamOpener,
) -> None:
    transport, seen = scripted(fail(httpx.ReadTimeout("slow")))
    with pytest.raises(OutcomeUnknown):
        on(open_stream, transport, content_type="text/plain").append(b"x")
    assert len(seen) == 1


def test_an_append_that_could_not_connect_is_sent_again(open_stream: StreamOpener) -> None:
    transport, seen = scripted(
        fail(httpx.ConnectError("refused")), ok(204, **{"Stream-Next-Offset": offset(1)})
    )
    stream = on(open_stream, transport, content_type="text/plain")
    assert stream.append(b"x") == Offset(offset(1))
    assert len(seen) == 2


def test_a_read_survives_server_trouble_within_the_bound(open_stream: StreamOpener) -> None:
    transport, seen = scripted(
        ok(503, **{"Retry-After": "0"}),
        fail(httpx.RemoteProtocolError("cut")),
        lambda r: httpx.Response(
            200,
            content=b"ab",
            headers={"Stream-Next-Offset": offset(2), "Stream-Up-To-Date": "true"},
        ),
    )
    batches = list(on(open_stream, transport).read())
    assert [b.data for b in batches] == [b"ab"] and len(seen) == 3


def test_retries_are_bounded(open_stream: StreamOpener) -> None:
    transport, seen = scripted(*[ok(503)] * FAST.max_attempts)
    with pytest.raises(Unavailable):
        on(open_stream, transport).head()
    assert len(seen) == FAST.max_attempts


def test_headers_may_come_from_a_callable_for_every_request(open_stream: StreamOpener) -> None:
    tokens = iter(["one", "two"])
    transport, seen = scripted(
        ok(503), ok(200, **{"Stream-Next-Offset": offset(0), "Content-Type": "text/plain"})
    )
    on(open_stream, transport, headers=lambda: {"Authorization": f"Bearer {next(tokens)}"}).head()
    assert [r.headers["Authorization"] for r in seen] == ["Bearer one", "Bearer two"]


def test_a_delete_retried_into_a_404_is_done(open_stream: StreamOpener) -> None:
    transport, _ = scripted(fail(httpx.ReadTimeout("slow")), ok(404))
    on(open_stream, transport).delete()
    transport, _ = scripted(ok(404))
    with pytest.raises(StreamNotFound):
        on(open_stream, transport).delete()


def test_a_json_append_that_lost_its_answer_was_sent_as_json(open_stream: StreamOpener) -> None:
    transport, seen = scripted(fail(httpx.ReadTimeout("slow")))
    with pytest.raises(OutcomeUnknown):
        on(open_stream, transport).append([{"a": 1}])
    assert json.loads(seen[0].content) == [{"a": 1}]
    assert seen[0].headers["Content-Type"] == "application/json"


def test_an_append_carries_the_streams_content_type_learnt_from_the_server(
    open_stream: StreamOpener,
) -> None:
    transport, seen = scripted(
        ok(200, **{"Stream-Next-Offset": offset(0), "Content-Type": "text/csv"}),
        ok(204, **{"Stream-Next-Offset": offset(4)}),
        ok(204, **{"Stream-Next-Offset": offset(8)}),
    )
    stream = on(open_stream, transport)
    stream.append(b"a,b\n")
    stream.append("c,d\n")
    assert [r.method for r in seen] == ["HEAD", "POST", "POST"]
    assert [r.headers["Content-Type"] for r in seen[1:]] == ["text/csv", "text/csv"]
