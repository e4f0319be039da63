"""The client against `dsaws serve`: every operation, catch-up and live reads; each test of a
stream runs against the sync client and the async one."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest
from flavours import StreamOpener
from support import ServerProcess

from durable_streams_aws.client import (
    AsyncDurableStream,
    Batch,
    DurableStream,
    Live,
    Offset,
    StreamClosed,
    StreamConflict,
    StreamNotFound,
    SyncIdempotentProducer,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with ServerProcess("--long-poll-timeout", "1") as server:
        yield f"{server.base_url}/v1/stream"


def test_write_read_close_and_delete(open_stream: StreamOpener, base: str) -> None:
    with open_stream(f"{base}/life-{open_stream.flavour}") as stream:
        created = stream.create("text/plain")
        assert created.next_offset == stream.create("text/plain").next_offset  # 200: no error
        first = stream.append("hello ")
        second = stream.append(b"world")
        assert created.next_offset < first < second
        assert b"".join(b.data for b in stream.read()) == b"hello world"
        assert [b.data for b in stream.read(first)] == [b"world"]
        final = stream.close()
        assert final == second and stream.close() == final  # closing twice is fine
        with pytest.raises(StreamClosed):
            stream.append("more")
        batches = list(stream.read())
        assert batches[-1].closed and batches[-1].next_offset == final
        assert stream.head().closed
        stream.delete()
        with pytest.raises(StreamNotFound):
            stream.head()


def test_close_with_a_final_message(open_stream: StreamOpener, base: str) -> None:
    with open_stream(f"{base}/last-words-{open_stream.flavour}") as stream:
        stream.create("application/json")
        stream.append([{"n": 1}])
        final = stream.close([{"n": "last"}])
        assert stream.head().next_offset == final and stream.head().closed
        assert [m for b in stream.read() for m in b.messages or []] == [{"n": 1}, {"n": "last"}]
        with pytest.raises(StreamClosed):  # a second close with a message is refused
            stream.close([{"n": "again"}])


def test_a_bounded_read_returns_the_same_range_every_time(
    open_stream: StreamOpener, base: str
) -> None:
    with open_stream(f"{base}/ranged-{open_stream.flavour}") as stream:
        stream.create("application/json")
        first = stream.append([{"n": n} for n in range(3)])
        stream.append([{"n": 3}])
        ranged = list(stream.read(until=first))
        assert [m for b in ranged for m in b.messages or []] == [{"n": n} for n in range(3)]
        assert ranged[-1].next_offset == first and not ranged[-1].closed
        stream.append([{"n": 4}])
        again = list(stream.read(until=first))
        assert [b.data for b in again] == [b.data for b in ranged]
        assert [b.data for b in stream.read(first, until=first)] == [b"[]"]
        with pytest.raises(ValueError, match="catch-up"):
            next(iter(stream.read(live="long-poll", until=first)))


def test_a_different_configuration_conflicts(open_stream: StreamOpener, base: str) -> None:
    with open_stream(f"{base}/config-{open_stream.flavour}") as stream:
        stream.create("text/plain")
        with pytest.raises(StreamConflict):
            stream.create("application/json")


def test_json_streams_take_and_give_python_values(open_stream: StreamOpener, base: str) -> None:
    with open_stream(f"{base}/json-{open_stream.flavour}") as stream:
        stream.create("application/json")
        stream.append([{"n": 1}, "two"])
        stream.append([[3]], close=True)
        messages = [m for batch in stream.read() for m in batch.messages or []]
        assert messages == [{"n": 1}, "two", [3]]


def test_a_live_reader_gets_every_append_and_stops_only_at_the_close(
    open_stream: StreamOpener, base: str
) -> None:
    with open_stream(f"{base}/live-{open_stream.flavour}") as writer:
        writer.create("text/plain")
        got: list[bytes] = []
        ends: list[bool] = []

        def follow() -> None:
            with open_stream(writer.url) as reader:
                for batch in reader.read(Offset.NOW, live="long-poll"):
                    got.append(batch.data)
                    ends.append(batch.closed)

        thread = threading.Thread(target=follow)
        thread.start()
        time.sleep(0.3)
        for word in (b"a", b"b", b"c"):
            writer.append(word)
            time.sleep(1.2)  # past a long-poll timeout: the reader goes on after a 204
        writer.close()
        thread.join(timeout=10)
        assert not thread.is_alive()
        assert b"".join(got) == b"abc"
        assert ends[-1] is True and not any(ends[:-1])


def test_fork_reads_its_source_up_to_the_fork_point(open_stream: StreamOpener, base: str) -> None:
    with (
        open_stream(f"{base}/origin-{open_stream.flavour}") as source,
        open_stream(f"{base}/branch-{open_stream.flavour}") as fork,
    ):
        source.create("text/plain")
        point = source.append("shared")
        source.append("-later")
        fork.fork(f"/v1/stream/origin-{open_stream.flavour}", offset=point)
        fork.append("-own")
        assert b"".join(b.data for b in fork.read()) == b"shared-own"


def test_the_async_client_in_asyncio_code(base: str) -> None:
    async def scenario() -> None:
        async with AsyncDurableStream(f"{base}/async") as stream:
            await stream.create("application/json")
            after = await stream.append([1, 2])
            await stream.append([3], close=True)
            batches = [batch async for batch in stream.read(live="long-poll")]
            assert [m for b in batches for m in b.messages or []] == [1, 2, 3]
            assert batches[-1].closed
            assert [b.messages async for b in stream.read(after)] == [[3]]
            assert (await stream.head()).closed

    asyncio.run(scenario())


def test_the_producer_from_synchronous_code(base: str) -> None:
    with DurableStream(f"{base}/sync-producer") as stream:
        stream.create("application/json")
    producer = SyncIdempotentProducer(f"{base}/sync-producer", "sync-writer")
    for n in range(25):
        producer.append({"n": n})
    producer.extend({"n": n} for n in range(25, 50))  # a generator, read on the caller's thread
    assert producer.flush() is not None
    final = producer.close({"n": "end"})
    with DurableStream(f"{base}/sync-producer") as stream:
        messages = [m for b in stream.read() for m in b.messages or []]
        assert messages == [*({"n": n} for n in range(50)), {"n": "end"}]
        assert stream.head().closed and stream.head().next_offset == final


@pytest.mark.parametrize("live", ["sse", "auto"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/json", "application/x-bin"])
def test_live_reads_follow_until_the_close(
    open_stream: StreamOpener, base: str, content_type: str, live: Live
) -> None:
    name = f"{base}/{live}-{content_type.replace('/', '-')}-{open_stream.flavour}"
    payloads: list[bytes | str | list[object]]
    if content_type == "application/json":
        payloads = [[{"n": 1}], [{"n": 2}, "three"]]
    elif content_type == "text/plain":
        payloads = ["line one\r\nline two", " and more\r"]
    else:
        payloads = [bytes(range(256)), b"\x00\r\n\xff"]
    with open_stream(name) as writer:
        writer.create(content_type)
        writer.append(payloads[0])
        got: list[Batch] = []

        def follow() -> None:
            with open_stream(name) as reader:
                got.extend(reader.read(live=live))

        thread = threading.Thread(target=follow)
        thread.start()
        time.sleep(0.5)
        writer.append(payloads[1])
        time.sleep(0.5)
        writer.close()
        thread.join(timeout=15)
        assert not thread.is_alive()
    assert got[-1].closed and not any(b.closed for b in got[:-1])
    if content_type == "application/json":
        assert [m for b in got for m in b.messages or []] == [{"n": 1}, {"n": 2}, "three"]
    elif content_type == "text/plain" and live == "sse":  # SSE lines carry no CR
        assert b"".join(b.data for b in got) == b"line one\nline two and more\n"
    elif content_type == "text/plain":  # auto follows text by long-poll: every byte kept
        assert b"".join(b.data for b in got) == b"line one\r\nline two and more\r"
    else:
        assert b"".join(b.data for b in got) == bytes(range(256)) + b"\x00\r\n\xff"


def test_a_read_left_undecoded_hands_over_the_json_arrays_as_sent(base: str) -> None:
    url = f"{base}/undecoded"
    with DurableStream(url) as stream:
        stream.create("application/json")
        stream.append([{"n": 1}, "two"])
        stream.append([3])
        decoded = [m for b in stream.read() for m in b.messages or []]
        batches = list(stream.read(decode=False))
        assert all(b.messages is None for b in batches)
        assert [m for b in batches for m in json.loads(b.data)] == decoded == [{"n": 1}, "two", 3]
        for live in ("sse", "auto"):
            with pytest.raises(ValueError, match="decode=False"):
                next(stream.read(live=live, decode=False))  # type: ignore[arg-type]
