"""`ChunkCache`: which chunks it keeps, how it finds the one holding a position, and how it
stays within its bytes."""

from __future__ import annotations

import random

from durable_streams_aws.core.storage._chunk_cache import ChunkCache, cacheable
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
