"""`ChunkCache`: which chunks it keeps, how it finds the one holding a position, and how it
stays within its bytes."""

from __future__ import annotations

import random

from counting_lock import CountingLock

from durable_streams_aws.core.storage._chunk_cache import _RUN_MOST, ChunkCache, cacheable
from durable_streams_aws.core.storage._chunk_layout import Chunk
from durable_streams_aws.core.storage._segments import Page


def inline(start: int, end: int) -> Chunk:
    return Chunk(start, end, bytes(end - start), None, None, None)


def test_the_chunk_holding_a_position_is_found() -> None:
    cache = ChunkCache(1 << 20)
    cache.remember("i", [inline(0, 10), inline(10, 25), inline(40, 41)])
    assert cache.covering("i", 0) == inline(0, 10)
    assert cache.covering("i", 9) == inline(0, 10)
    assert cache.covering("i", 10) == inline(10, 25)
    assert cache.covering("i", 24) == inline(10, 25)
    assert cache.covering("i", 25) is None  # not known: read from DynamoDB
    assert cache.covering("i", 39) is None
    assert cache.covering("i", 40) == inline(40, 41)
    assert cache.covering("i", 41) is None
    assert cache.covering("other", 0) is None


def test_chunks_met_out_of_order_are_found_in_order() -> None:
    cache = ChunkCache(1 << 20)
    chunks = [inline(n * 10, n * 10 + 10) for n in range(50)]
    shuffled = chunks[:]
    random.Random(1).shuffle(shuffled)
    for chunk in shuffled:
        cache.remember("i", [chunk, chunk])  # met twice: kept once
    for position in range(500):
        assert cache.covering("i", position) == chunks[position // 10]
    assert cache.held_bytes == sum(10 + 450 for _ in chunks)


def test_only_chunks_held_inline_or_void_are_kept() -> None:
    in_s3 = Chunk(0, 10, None, "data/i/k", None, None)
    void = Chunk(10, 20, None, None, None, None, void=True)
    segment = Chunk(20, 30, None, "data/i/seg", None, None, pages=(Page(20, 30, 1, 0),))
    assert not cacheable(in_s3) and cacheable(void) and not cacheable(segment)
    cache = ChunkCache(1 << 20)
    cache.remember("i", [in_s3, void, segment])
    assert cache.covering("i", 5) is None
    assert cache.covering("i", 15) == void
    assert cache.covering("i", 25) is None


def test_the_oldest_entries_go_first_beyond_the_budget() -> None:
    cache = ChunkCache(3 * (100 + 450))
    for n in range(5):
        cache.remember("i", [inline(n * 100, n * 100 + 100)])
    assert cache.held_bytes <= cache.max_bytes
    assert [cache.covering("i", n * 100) is not None for n in range(5)] == [
        False,
        False,
        True,
        True,
        True,
    ]
    cache.remember("j", [inline(0, 100)])
    assert cache.covering("i", 200) is None and cache.covering("j", 0) is not None


def test_a_chunk_larger_than_the_budget_or_a_zero_budget_keeps_nothing() -> None:
    cache = ChunkCache(500)
    cache.remember("i", [inline(0, 100)])
    assert cache.covering("i", 0) is None and cache.held_bytes == 0
    none = ChunkCache(0)
    none.remember("i", [inline(0, 1)])
    assert none.covering("i", 0) is None


def test_a_run_is_the_chunks_laid_end_to_end_from_a_position() -> None:
    cache = ChunkCache(1 << 20)
    void = Chunk(25, 30, None, None, None, None, void=True)
    cache.remember("i", [inline(0, 10), inline(10, 25), void, inline(30, 31), inline(40, 50)])
    assert cache.run("i", 5, 1000) == [inline(0, 10), inline(10, 25), void, inline(30, 31)]
    assert cache.run("i", 10, 1000) == [inline(10, 25), void, inline(30, 31)]
    assert cache.run("i", 31, 1000) == []  # not known: read from DynamoDB
    assert cache.run("i", 45, 1000) == [inline(40, 50)]
    assert cache.run("other", 0, 1000) == []


def test_a_run_stops_before_the_first_chunk_starting_at_its_limit() -> None:
    cache = ChunkCache(1 << 20)
    chunks = [inline(n * 10, n * 10 + 10) for n in range(20)]
    cache.remember("i", chunks)
    assert cache.run("i", 3, 30) == chunks[:3]
    assert cache.run("i", 3, 31) == chunks[:4]
    # The chunk holding the position is always in it, whatever the limit.
    assert cache.run("i", 57, 0) == [chunks[5]]
    rng = random.Random(3)
    for _ in range(200):
        position, limit = rng.randrange(0, 210), rng.randrange(0, 260)
        expected = [
            c for c in chunks if c.end > position and (c.start <= position or c.start < limit)
        ]
        assert cache.run("i", position, limit) == expected


def test_a_run_of_many_chunks_takes_the_lock_once() -> None:
    """Two threads reading cached chunks at once were several times slower than one after the
    other when each chunk took the lock: a run takes it once."""
    cache = ChunkCache(1 << 24)
    cache.remember("i", [inline(n, n + 1) for n in range(5000)])
    lock = CountingLock()
    cache._lock = lock  # type: ignore[assignment]
    assert len(cache.run("i", 0, 2000)) == 2000
    assert lock.taken == 1
    # However far the limit, a lookup walks a bounded run (a writer waits for the lock).
    assert len(cache.run("i", 0, 10_000)) == _RUN_MOST < 5000
