"""The sealed-segment cache: what it answers is what every segment it was told of answers
(the one reaching furthest from a position), and what it holds stays under its bound however
many streams and segments a reader walks (security round 3, F6). Pure."""

from __future__ import annotations

import random
import tracemalloc

from durable_streams_aws.core.storage._chunk_layout import Chunk
from durable_streams_aws.core.storage._segment_cache import SegmentCache, weight
from durable_streams_aws.core.storage._segments import Page


def segment(start: int, end: int, pages: int = 8, key: str | None = None) -> Chunk:
    step = max((end - start) // max(pages, 1), 1)
    directory = tuple(
        Page(start + i * step, min(start + (i + 1) * step, end), 10, i * step) for i in range(pages)
    )
    return Chunk(start, end, None, key or f"k/{start}-{end}", None, None, pages=directory)


def reference(told: list[Chunk], position: int) -> int | None:
    """How far the segment reaching furthest from `position` reaches, of all those told."""
    holding = [s.end for s in told if s.start <= position < s.end]
    return max(holding, default=None)


def test_it_answers_as_every_segment_told_would() -> None:
    rng = random.Random(7)
    for _ in range(200):
        cache, told = SegmentCache(), []
        for _ in range(rng.randrange(1, 30)):
            start = rng.randrange(0, 1000)
            piece = segment(start, start + rng.randrange(1, 300), pages=rng.randrange(0, 4))
            cache.remember("i", piece)
            told.append(piece)
        for position in range(0, 1400, 7):
            found = cache.covering("i", position)
            reach = reference(told, position)
            assert (found.end if found else None) == reach
            assert found is None or found.start <= position < found.end
        assert cache.weight == sum(map(weight, cache._by_incarnation["i"]))


def test_a_segment_a_later_one_covers_is_dropped() -> None:
    cache = SegmentCache()
    for end in range(100, 10_100, 100):  # a stream sealed again and again from its start
        cache.remember("grown", segment(0, end))
    assert cache._by_incarnation["grown"] == [segment(0, 10_000)]
    cache.remember("grown", segment(200, 300))  # inside: adds nothing
    assert len(cache._by_incarnation["grown"]) == 1 and cache.weight == weight(segment(0, 10))


def test_many_large_streams_stay_under_the_bound() -> None:
    """A reader walking 400 streams of 100 segments each (8 pages apiece): the cache keeps
    the most recently read within its weight, and its memory with it."""
    bound = 4_000
    cache = SegmentCache(max_weight=bound)
    tracemalloc.start()
    try:
        for stream in range(400):
            for n in range(100):
                cache.remember(f"inc-{stream}", segment(n * 8, (n + 1) * 8, key=f"{stream}/{n}"))
            assert cache.weight <= bound
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Bounded: every segment of every stream (before) was 40,000 segments and 320,000 pages.
    assert held < 4 * 1024 * 1024
    assert cache.covering("inc-399", 799) is not None  # the latest read stays
    assert cache.covering("inc-0", 8) is None  # the oldest went first


def test_one_stream_larger_than_the_bound_keeps_its_newest_segments() -> None:
    cache = SegmentCache(max_weight=90)
    for n in range(50):
        cache.remember("huge", segment(n * 10, (n + 1) * 10))
    assert cache.weight <= 90
    assert cache.covering("huge", 495) is not None and cache.covering("huge", 5) is None


def test_forgetting_an_incarnation_returns_its_weight() -> None:
    cache = SegmentCache()
    cache.remember("a", segment(0, 10))
    cache.remember("b", segment(0, 10))
    cache.forget("a")
    assert cache.covering("a", 5) is None and cache.weight == weight(segment(0, 10))


def test_the_next_known_segment_start_is_found() -> None:
    rng = random.Random(11)
    for _ in range(100):
        cache, told = SegmentCache(), []
        for _ in range(rng.randrange(0, 12)):
            start = rng.randrange(0, 1000)
            piece = segment(start, start + rng.randrange(1, 200), pages=1)
            cache.remember("i", piece)
            told.append(piece)
        for position in range(0, 1300, 3):
            found = cache.next_start("i", position)
            if found is None:
                # Nothing kept starts after `position`: every segment told that does is inside
                # one kept (which starts at or before it).
                assert all(
                    cache.covering("i", s.start) is not None for s in told if s.start > position
                )
            else:
                assert found > position and cache.covering("i", found) is not None
                # No segment kept starts between `position` and it.
                assert all(
                    cache.covering("i", p) is None or cache.covering("i", p).start <= position
                    for p in range(position + 1, found)
                )
    assert SegmentCache().next_start("i", 0) is None
