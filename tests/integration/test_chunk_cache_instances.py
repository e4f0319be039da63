"""The chunk cache (`core.storage._chunk_cache`) across instances, as Lambda instances run:
what a writer committed it reads back without a Query, another instance reads the same bytes
from DynamoDB and then from its own memory, and every read, at every position and budget, is
the same batch whether it came from memory or from the table; through sealing, a fork, and
the stream deleted and made again."""

from __future__ import annotations

import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from counting_lock import CountingLock
from sealing_support import (
    BYTES,
    JSON,
    Expected,
    append_units,
    check_everywhere,
    filled_stream,
    partition_items,
)
from support import store_on

from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    CreateSpec,
    DynamoStore,
    ForkRequest,
    Sealer,
    SealPolicy,
)
from durable_streams_aws.core.storage._chunk_layout import Chunk, decode_chunk


class Queries:
    """Counts the Query calls of the (shared) DynamoDB client."""

    def __init__(self, client: Any) -> None:
        self.count = 0
        self._client = client

    def __call__(self, **_: Any) -> None:
        self.count += 1

    def taken(self) -> int:
        found, self.count = self.count, 0
        return found


@pytest.fixture
def queries(backend: Backend) -> Iterator[Queries]:
    counter = Queries(backend.dynamodb)
    backend.dynamodb.meta.events.register("before-call.dynamodb.Query", counter)
    yield counter
    backend.dynamodb.meta.events.unregister("before-call.dynamodb.Query", counter)


def read_all(store: DynamoStore, path: str, budget: int = 1 << 20) -> bytes | list[bytes]:
    info = store.get(path)
    assert info is not None
    position, data, messages = 0, b"", []
    while position < info.tail:
        batch = store.read(info, position, budget)
        assert batch.end > position
        data += batch.data or b""
        messages.extend(batch.messages or ())
        position = batch.end
    return messages if info.content_type == JSON else data


def same_reads(cached: DynamoStore, uncached: DynamoStore, path: str, bounds: list[int]) -> None:
    """Reads from around every 4th append's bounds and a few other positions, at several
    budgets, whole or not, are the same batches from memory as from DynamoDB."""
    info = uncached.get(path)
    assert info is not None
    starts = {p + d for p in bounds[::4] for d in (-1, 0, 1)}
    starts.update(random.Random(path).sample(range(info.tail + 1), min(8, info.tail + 1)))
    for start in sorted(p for p in starts if 0 <= p <= info.tail):
        for budget in (1, 400, 1 << 20):
            for whole in (False, True):
                assert cached.read(info, start, budget, whole) == uncached.read(
                    info, start, budget, whole
                ), (path, start, budget, whole)


@pytest.mark.parametrize("content_type", [BYTES, JSON])
def test_a_writer_reads_what_it_committed_without_a_query(
    backend: Backend, queries: Queries, content_type: str
) -> None:
    writer, other = store_on(backend), store_on(backend)
    expected = filled_stream(writer, "s", content_type, appends=60)
    want = expected.units if content_type == JSON else expected.data()
    queries.taken()
    assert read_all(writer, "s") == want
    assert queries.taken() == 0
    assert read_all(other, "s") == want  # from DynamoDB
    assert queries.taken() >= 1
    assert read_all(other, "s") == want  # now from its own memory
    assert queries.taken() == 0
    same_reads(writer, store_on(backend, chunk_cache_bytes=0), "s", expected.boundaries())


def test_reads_from_memory_and_from_the_table_agree_through_sealing_forks_and_recreation(
    backend: Backend,
) -> None:
    writer, reader = store_on(backend), store_on(backend)
    table = store_on(backend, chunk_cache_bytes=0)  # what DynamoDB and S3 hold
    expected = filled_stream(writer, "s", BYTES, appends=40, seed=2)
    assert read_all(reader, "s") == expected.data()
    same_reads(writer, table, "s", expected.boundaries())
    same_reads(reader, table, "s", expected.boundaries())
    # History the stream item says is sealed is read as segments (whole pages) by every
    # instance, whatever it remembers of the chunks: the same batches everywhere.
    policy = SealPolicy(segment_bytes=900, hot_bytes=0, page_bytes=300)
    Sealer(store_on(backend), policy).seal("s")
    for store in (writer, reader, table):
        check_everywhere(store, "s", expected)
    same_reads(writer, store_on(backend, chunk_cache_bytes=0), "s", expected.boundaries())
    point = expected.boundaries()[25]
    writer.create("f", CreateSpec(BYTES, fork=ForkRequest("s", point)))
    fork = Expected(BYTES, units=[expected.data()[:point]])
    append_units(reader, "f", fork, [b"after the fork point"])
    append_units(writer, "s", expected, [b"after the fork, in the source"])
    for store in (writer, reader, table):
        check_everywhere(store, "f", fork)
        check_everywhere(store, "s", expected)


def test_a_stream_made_again_is_read_as_it_now_is(backend: Backend) -> None:
    """Deleted and made again, a path is a new incarnation, which no memory holds."""
    writer, reader = store_on(backend), store_on(backend)
    table = store_on(backend, chunk_cache_bytes=0)
    old = filled_stream(writer, "r", BYTES, appends=10, seed=4)
    assert read_all(reader, "r") == old.data()
    reader.delete("r")
    writer.create("r", CreateSpec(BYTES))
    again = Expected(BYTES)
    append_units(reader, "r", again, [b"new"])
    append_units(writer, "r", again, [b"er"])
    for store in (writer, reader):
        assert read_all(store, "r") == b"newer"
        same_reads(store, table, "r", again.boundaries())


def test_a_small_cache_reads_from_memory_and_the_table_in_turn(backend: Backend) -> None:
    small = store_on(backend, chunk_cache_bytes=2000)
    expected = filled_stream(small, "s", JSON, appends=80, seed=3)
    assert small.chunks.recent.held_bytes <= 2000
    assert read_all(small, "s", budget=300) == expected.units
    same_reads(small, store_on(backend, chunk_cache_bytes=0), "s", expected.boundaries())


def test_a_read_of_many_cached_chunks_takes_the_caches_locks_a_few_times(
    backend: Backend, queries: Queries
) -> None:
    """Taking a cache's lock for every chunk made two threads reading cached chunks at once
    several times slower than one after the other (the lock and the GIL handed back and
    forth); a read takes cached chunks a run at a time. Two readers at once read what one
    reads."""
    writer = store_on(backend)
    writer.create("many", CreateSpec(JSON))
    expected = Expected(JSON)
    for n in range(400):
        append_units(writer, "many", expected, [b'{"n":%d}' % n])
    locks = CountingLock(), CountingLock()
    writer.chunks.recent._lock, writer.chunks.segments._lock = locks  # type: ignore[assignment]
    queries.taken()
    assert read_all(writer, "many") == expected.units
    assert queries.taken() == 0
    assert sum(lock.taken for lock in locks) <= 4
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda _: read_all(writer, "many", budget=700), range(2)))
    assert both == [expected.units, expected.units]


@pytest.mark.both_dynamodbs  # its Query of sealed history alone is a BETWEEN with a Limit
@pytest.mark.parametrize("content_type", [BYTES, JSON])
def test_a_read_through_sealed_history_takes_the_newest_chunks_from_memory(
    backend: Backend, queries: Queries, content_type: str
) -> None:
    """Sealed history is read as its segments (queried), and the chunks after it, which the
    writer holds, come from its memory: the Query of a read from the start finds sealed
    history's items only, where it went on through the tail's chunks a page at a time. An
    instance holding none of the tail still reads it in that one Query. Every read is the
    batch the table gives."""
    writer = store_on(backend)
    expected = filled_stream(writer, "t", content_type, appends=120, seed=5)
    Sealer(store_on(backend), SealPolicy(segment_bytes=900, hot_bytes=600, page_bytes=300)).seal(
        "t"
    )
    info = writer.get("t")
    assert info is not None and 0 < info.sealed < info.tail
    found: list[int] = []

    def items_found(parsed: dict[str, Any], **_: Any) -> None:
        found.append(len(parsed.get("Items", ())))

    backend.dynamodb.meta.events.register("after-call.dynamodb.Query", items_found)
    try:
        batch = writer.read(info, 0, 1 << 20)
    finally:
        backend.dynamodb.meta.events.unregister("after-call.dynamodb.Query", items_found)
    assert batch.end == info.tail
    history = [c for c in table_chunks(backend, info.incarnation) if c.end <= info.sealed]
    assert found == [len(history)]
    # An instance that holds none of the tail reads it with the same Query, as before.
    queries.taken()
    assert store_on(backend).read(info, 0, 1 << 20) == batch
    assert queries.taken() == 1
    want = expected.units if content_type == JSON else expected.data()
    assert (list(batch.messages or ()) if content_type == JSON else batch.data) == want
    same_reads(writer, store_on(backend, chunk_cache_bytes=0), "t", expected.boundaries())
    check_everywhere(writer, "t", expected)


def table_chunks(backend: Backend, incarnation: str) -> list[Chunk]:
    return [
        decode_chunk(item)
        for item in partition_items(backend, incarnation)
        if item["sk"]["S"].startswith("c#")
    ]
