"""What the upstream client conformance suite asks of a client, checked on our own terms:
errors that name their stream, `stream_seq`, a long-poll's 204 and the offset `now` resolved
to, `until` against a server without the extension, when a plain append is sent again, and
arguments refused at construction. Scripted servers (httpx.MockTransport); fast. Every test
of a stream runs against the sync client and the async one."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from flavours import StreamOpener
from scripted import FAST, Step, offset, scripted

from durable_streams_aws.client import (
    AccessDenied,
    AsyncDurableStream,
    DurableStream,
    IdempotentProducer,
    Offset,
    OutcomeUnknown,
    ProducerSettings,
    SequenceConflict,
    StreamClosed,
    StreamConflict,
    StreamInfo,
    StreamNotFound,
    SyncIdempotentProducer,
    Unavailable,
    UntilNotSupported,
)
from durable_streams_aws.client._attempts import after_answer, after_check
from durable_streams_aws.client._wire import ReadSession, append_request

URL = "http://server.test/v1/stream/orders-7"


def answer(status: int, body: bytes = b"", **headers: str) -> Step:
    names = {"next": "Stream-Next-Offset", "up": "Stream-Up-To-Date", "closed": "Stream-Closed"}
    names |= {"ctype": "Content-Type", "retry": "Retry-After"}
    fields = {names.get(k, k): v for k, v in headers.items()}
    return lambda request: httpx.Response(status, content=body, headers=fields)


def stream_on(
    open_stream: StreamOpener, transport: httpx.MockTransport, url: str = URL, **options
) -> DurableStream:
    """A text stream of the flavour under test, on a scripted server."""
    return open_stream(url, transport=transport, retry=FAST, content_type="text/plain", **options)


def created(position: int = 0) -> Step:
    return answer(201, next=offset(position), ctype="text/plain")


# ---------------------------------------------------------------- errors name their stream


@pytest.mark.parametrize("method", ["read", "append", "head"])
def test_errors_name_the_stream_they_are_about(open_stream: StreamOpener, method: str) -> None:
    transport, _ = scripted(answer(404, b'{"error": "no such stream"}'))
    stream = stream_on(open_stream, transport)
    with pytest.raises(StreamNotFound) as caught:
        if method == "read":
            list(stream.read())
        elif method == "append":
            stream.append(b"x")
        else:
            stream.head()
    assert "/v1/stream/orders-7" in str(caught.value)
    assert caught.value.status == 404


def test_error_messages_leave_a_signed_urls_query_out(open_stream: StreamOpener) -> None:
    transport, _ = scripted(answer(403, b"expired"))
    with pytest.raises(AccessDenied) as caught:
        stream_on(open_stream, transport, url=URL + "?sig=secret").head()
    assert "orders-7" in str(caught.value) and "secret" not in str(caught.value)


def test_a_stream_urls_own_query_survives_a_reads_parameters(open_stream: StreamOpener) -> None:
    transport, seen = scripted(answer(200, b"ab", next=offset(2), up="true"))
    list(stream_on(open_stream, transport, url=URL + "?sig=abc").read())
    assert seen[0].url.params["sig"] == "abc" and seen[0].url.params["offset"] == "-1"


# ---------------------------------------------------------------- Stream-Seq


def test_stream_seq_travels_as_its_header(open_stream: StreamOpener) -> None:
    transport, seen = scripted(answer(204, next=offset(1)))
    stream_on(open_stream, transport).append(b"x", stream_seq="0000000042")
    assert seen[0].headers["Stream-Seq"] == "0000000042"


@pytest.mark.parametrize(
    ("value", "error"), [(7, TypeError), ("", ValueError), ("a b", ValueError)]
)
def test_a_stream_seq_that_is_not_a_header_value_is_refused_before_sending(
    open_stream: StreamOpener, value: object, error: type[Exception]
) -> None:
    transport, seen = scripted()
    with pytest.raises(error):
        stream_on(open_stream, transport).append(b"x", stream_seq=value)  # type: ignore[arg-type]
    assert seen == []


def test_a_stream_seq_refused_by_the_server_is_a_sequence_conflict(
    open_stream: StreamOpener,
) -> None:
    transport, _ = scripted(answer(409, b"Sequence conflict: 2 <= 5"))
    with pytest.raises(SequenceConflict) as caught:
        stream_on(open_stream, transport).append(b"x", stream_seq="2")
    assert isinstance(caught.value, StreamConflict)


def test_a_closed_stream_stays_closed_even_with_a_stream_seq(open_stream: StreamOpener) -> None:
    transport, _ = scripted(answer(409, b"stream is closed", closed="true"))
    with pytest.raises(StreamClosed):
        stream_on(open_stream, transport).append(b"x", stream_seq="2")


def test_other_conflicts_without_a_stream_seq_are_not_sequence_conflicts(
    open_stream: StreamOpener,
) -> None:
    transport, _ = scripted(answer(409, b"seq? no: content type mismatch"))
    with pytest.raises(StreamConflict) as caught:
        stream_on(open_stream, transport).append(b"x")
    assert not isinstance(caught.value, SequenceConflict)


# ---------------------------------------------------------------- status, idle, NOW


def test_a_long_polls_204_is_handed_over_with_idle(open_stream: StreamOpener) -> None:
    transport, _ = scripted(
        answer(204, next=offset(5), up="true"), answer(200, b"new", next=offset(8), up="true")
    )
    batches = stream_on(open_stream, transport).read(Offset.NOW, live="long-poll", idle=True)
    quiet, data = next(batches), next(batches)
    assert (quiet.status, quiet.data, quiet.up_to_date) == (204, b"", True)
    assert quiet.offset == Offset.NOW and quiet.next_offset == Offset(offset(5))
    assert (data.status, data.data, data.offset) == (200, b"new", Offset(offset(5)))


def test_without_idle_a_long_polls_204_is_not_a_batch(open_stream: StreamOpener) -> None:
    transport, seen = scripted(
        answer(204, next=offset(5), up="true"), answer(200, b"new", next=offset(8), up="true")
    )
    first = next(stream_on(open_stream, transport).read(Offset.NOW, live="long-poll"))
    assert first.data == b"new" and len(seen) == 2


def test_a_catch_up_read_from_now_says_where_now_was(open_stream: StreamOpener) -> None:
    transport, _ = scripted(answer(200, b"", next=offset(9), up="true"))
    (batch,) = list(stream_on(open_stream, transport).read(Offset.NOW))
    assert batch.next_offset == Offset(offset(9)) and batch.data == b"" and batch.status == 200


# ---------------------------------------------------------------- until


def test_a_server_that_ignores_until_is_caught_and_nothing_past_the_bound_is_handed_over(
    open_stream: StreamOpener,
) -> None:
    transport, _ = scripted(
        answer(200, b"abcd", next=offset(4)), answer(200, b"efgh", next=offset(8), up="true")
    )
    batches = stream_on(open_stream, transport).read(Offset(offset(0)), until=Offset(offset(6)))
    assert next(batches).data == b"abcd"  # ends before the bound: all of it is wanted
    with pytest.raises(UntilNotSupported) as caught:
        next(batches)
    assert offset(6) in str(caught.value) and "orders-7" in str(caught.value)


def test_a_server_with_until_ends_the_read_at_the_bound(open_stream: StreamOpener) -> None:
    transport, seen = scripted(answer(200, b"abcdef", next=offset(6)))
    batches = list(
        stream_on(open_stream, transport).read(Offset(offset(0)), until=Offset(offset(6)))
    )
    assert [b.data for b in batches] == [b"abcdef"]
    assert seen[0].url.params["until"] == offset(6)


def test_until_now_is_refused(open_stream: StreamOpener) -> None:
    with pytest.raises(ValueError):
        list(stream_on(open_stream, scripted()[0]).read(until=Offset.NOW))


def test_until_past_the_answer_is_checked_by_the_session_alone() -> None:
    session = ReadSession(Offset(offset(0)), None, until=Offset(offset(2)))
    response = httpx.Response(200, content=b"abc", headers={"Stream-Next-Offset": offset(3)})
    with pytest.raises(UntilNotSupported):
        session.accept(response)
    assert session.offset == Offset(offset(0))  # the read still stands before that answer


# ---------------------------------------------------------------- when an append goes again


def post(tail: Offset | None = None) -> object:
    return append_request("text/plain", b"x", tail_before=tail)


def reply(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_an_append_refused_with_503_and_retry_after_goes_again() -> None:
    step = after_answer(FAST, post(), 1, reply(503, **{"Retry-After": "0"}))  # type: ignore[arg-type]
    assert step.pause == 0.0


@pytest.mark.parametrize("status", [500, 503])
def test_a_500_or_503_with_the_tail_known_is_checked_first(status: int) -> None:
    step = after_answer(FAST, post(Offset(offset(4))), 1, reply(status))  # type: ignore[arg-type]
    assert step.verify and not step.accept


@pytest.mark.parametrize("status", [500, 503])
def test_a_500_or_503_with_the_tail_unknown_is_an_unknown_outcome(status: int) -> None:
    step = after_answer(FAST, post(), 1, reply(status))  # type: ignore[arg-type]
    assert isinstance(step.error, OutcomeUnknown) and "not known" in str(step.error)


@pytest.mark.parametrize("status", [502, 504])
def test_a_gateways_failure_is_never_checked_away(status: int) -> None:
    step = after_answer(FAST, post(Offset(offset(4))), 1, reply(status))  # type: ignore[arg-type]
    assert isinstance(step.error, OutcomeUnknown)


def test_the_check_goes_again_only_while_the_tail_has_not_moved() -> None:
    before = Offset(offset(4))
    same = StreamInfo("text/plain", before, closed=False)
    moved = StreamInfo("text/plain", Offset(offset(5)), closed=False)
    closed = StreamInfo("text/plain", before, closed=True)
    request = post(before)
    assert after_check(FAST, request, 1, URL, same).pause is not None  # type: ignore[arg-type]
    for info in (moved, closed):
        assert isinstance(after_check(FAST, request, 1, URL, info).error, OutcomeUnknown)  # type: ignore[arg-type]


def test_an_append_answered_500_is_sent_again_when_the_tail_did_not_move(
    open_stream: StreamOpener,
) -> None:
    transport, seen = scripted(
        created(4),
        answer(500, b"oops"),
        answer(200, next=offset(4), ctype="text/plain"),
        answer(204, next=offset(5)),
    )
    stream = stream_on(open_stream, transport)
    stream.create("text/plain")
    assert stream.append(b"x") == Offset(offset(5))
    assert [r.method for r in seen] == ["PUT", "POST", "HEAD", "POST"]
    assert stream.tail == Offset(offset(5))


def test_an_append_answered_500_is_not_sent_again_when_the_tail_moved(
    open_stream: StreamOpener,
) -> None:
    transport, seen = scripted(
        created(4), answer(500, b"oops"), answer(200, next=offset(5), ctype="text/plain")
    )
    stream = stream_on(open_stream, transport)
    stream.create("text/plain")
    with pytest.raises(OutcomeUnknown) as caught:
        stream.append(b"x")
    assert [r.method for r in seen] == ["PUT", "POST", "HEAD"]
    assert "moved" in str(caught.value)


def test_an_append_without_a_known_tail_is_not_sent_again_after_a_500(
    open_stream: StreamOpener,
) -> None:
    transport, seen = scripted(answer(500, b"oops"))
    with pytest.raises(OutcomeUnknown):
        stream_on(open_stream, transport).append(b"x")
    assert len(seen) == 1


def test_an_append_whose_tail_cannot_be_read_after_a_500_is_an_unknown_outcome(
    open_stream: StreamOpener,
) -> None:
    transport, _ = scripted(created(4), answer(500), *[answer(503)] * FAST.max_attempts)
    stream = stream_on(open_stream, transport)
    stream.create("text/plain")
    with pytest.raises(OutcomeUnknown) as caught:
        stream.append(b"x")
    assert "could not be read" in str(caught.value)


def test_persistent_503s_with_retry_after_end_unavailable_not_unknown(
    open_stream: StreamOpener,
) -> None:
    transport, seen = scripted(*[answer(503, retry="0")] * FAST.max_attempts)
    with pytest.raises(Unavailable):
        stream_on(open_stream, transport).append(b"x")
    assert len(seen) == FAST.max_attempts


# ---------------------------------------------------------------- arguments refused early


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_batch_bytes": 0}, "max_batch_bytes"),
        ({"max_batch_bytes": -1}, "max_batch_bytes"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"max_buffered_bytes": 0}, "max_buffered_bytes"),
        ({"linger": -0.1}, "linger"),
        ({"max_batch_bytes": True}, "max_batch_bytes"),
    ],
)
def test_producer_settings_that_cannot_work_are_refused(options: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ProducerSettings(**options)


@pytest.mark.parametrize(
    ("producer_id", "epoch", "named"),
    [("p", -1, "epoch"), ("p", True, "epoch"), ("p", 1.5, "epoch"), ("", 0, "producer_id")],
)
def test_producer_identities_that_cannot_work_are_refused(
    producer_id: str, epoch: int, named: str
) -> None:
    stream = AsyncDurableStream(URL)
    with pytest.raises(ValueError, match=named):
        IdempotentProducer(stream, producer_id, epoch=epoch)
    with pytest.raises(ValueError, match=named):
        SyncIdempotentProducer(URL, producer_id, epoch=epoch)


def test_valid_producer_arguments_are_accepted() -> None:
    settings = ProducerSettings(max_batch_bytes=1, max_in_flight=1, linger=0.0)
    IdempotentProducer(AsyncDurableStream(URL), "p", epoch=0, settings=settings)


def test_a_producer_that_closed_the_stream_answers_a_second_close_without_a_request() -> None:
    async def scenario() -> None:
        transport, seen = scripted(
            answer(200, next=offset(0), ctype="text/plain"),
            answer(204, next=offset(0), closed="true"),
        )
        client = httpx.AsyncClient(transport=transport)
        producer = IdempotentProducer(AsyncDurableStream(URL, client=client), "p")
        first = await producer.close()
        assert await producer.close() == first == Offset(offset(0))
        assert [r.method for r in seen] == ["HEAD", "POST"]

    asyncio.run(scenario())
