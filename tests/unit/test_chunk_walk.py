"""How a read walks what this process knows of a stream (`ChunkStore._chunks`): the sealed
segments it knows answer their positions first, cached chunks the rest, and where neither
holds the next position the read queries DynamoDB. The walk takes cached chunks a run at a
time; what it meets must be what a walk asking both caches at every position meets. Pure: no
AWS (the query is a stand-in that records where it was asked to start)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from durable_streams_aws.core.storage._chunk_layout import Chunk
from durable_streams_aws.core.storage._chunks import ChunkStore
from durable_streams_aws.core.storage._segments import Page
from durable_streams_aws.core.storage.model import Segment

INLINE_MAX = 50


def inline(start: int, end: int) -> Chunk:
    return Chunk(start, end, bytes(end - start), None, None, None)


def sealed(start: int, end: int) -> Chunk:
    return Chunk(
        start, end, None, f"seg/{start}-{end}", None, None, pages=(Page(start, end, 1, 0),)
    )


class Walk:
    """A store with no AWS behind it: its query yields nothing and records where it began."""

    def __init__(self) -> None:
        self.store = ChunkStore(None, None, "t", "b", INLINE_MAX)
        self.queried: list[int] = []
        self.items: list[Chunk] = []  # what the table holds, in order of their ends
        self.store._query_chunks = self._query  # type: ignore[method-assign]

    def _query(
        self, segment: Segment, position: int, up_to: int | None = None, page_items: int = 0
    ) -> Iterator[Chunk]:
        self.queried.append(position)
        return iter([c for c in self.items if position < c.end <= (up_to or c.end)])


def reference(
    store: ChunkStore, segment: Segment, position: int, reach: int
) -> tuple[list[Chunk], int | None]:
    """Both caches asked at every position, in that order: what is met, and where a query
    would begin (None: the segment's end was reached)."""
    met = []
    position = max(position, segment.start)
    while position < segment.end:
        known = store.segments.covering(segment.incarnation, position)
        if known is None:
            known = store.recent.covering(segment.incarnation, position)
        if known is None:
            return met, position
        met.append(known)
        position = known.end
    return met, None


def test_the_walk_meets_what_asking_at_every_position_meets() -> None:
    rng = random.Random(5)
    for _ in range(300):
        walk = Walk()
        bounds = sorted(rng.sample(range(1, 400), rng.randrange(1, 60)))
        chunks = [inline(a, b) for a, b in zip([0, *bounds], bounds, strict=False)]
        # Some chunks forgotten (gaps), some runs of them also known as sealed segments.
        walk.store.recent.remember("i", [c for c in chunks if rng.random() < 0.9])
        for _ in range(rng.randrange(0, 4)):
            lo = rng.randrange(len(chunks))
            hi = min(len(chunks) - 1, lo + rng.randrange(0, 6))
            walk.store.segments.remember("i", sealed(chunks[lo].start, chunks[hi].end))
        segment = Segment("i", rng.randrange(0, 50), rng.randrange(50, 420))
        for position in range(0, 420, 13):
            reach = position + rng.choice([1, 30, 200, 10_000])
            walk.queried.clear()
            got = list(walk.store._chunks(segment, position, reach))
            met, query_at = reference(walk.store, segment, position, reach)
            # The walk may stop its run short of `reach` (plus an inline chunk) and go on
            # with the next: what it meets is the same.
            assert got == met, (position, reach)
            assert (walk.queried[:1] or [None])[0] == query_at


def test_sealed_history_is_never_read_from_cached_chunks() -> None:
    """A read of history the stream item says is sealed reads segments, from memory or
    queried, never chunks (so every instance answers it in the same batches)."""
    walk = Walk()
    walk.store.recent.remember("i", [inline(n, n + 10) for n in range(0, 100, 10)])
    walk.store.segments.remember("i", sealed(0, 30))
    walk.items = [sealed(0, 30), sealed(30, 100)]
    got = list(walk.store._chunks(Segment("i", 0, 100), 0, reach=1000, sealed=100))
    assert got == [sealed(0, 30), sealed(30, 100)] and walk.queried == [30]


def test_past_sealed_history_the_read_takes_the_chunks_it_holds() -> None:
    """Once the queried segments take the read past sealed history, the newest chunks come
    from memory: not queried again. A chunk a segment replaced, still in the table, does not
    move the walk on (the read passes over it)."""
    walk = Walk()
    chunks = [inline(n, n + 10) for n in range(0, 100, 10)]
    walk.store.recent.remember("i", chunks)
    replaced = inline(40, 50)
    walk.items = [sealed(0, 30), replaced, sealed(30, 60)]
    got = list(walk.store._chunks(Segment("i", 0, 100), 0, reach=1000, sealed=60))
    assert got == [sealed(0, 30), replaced, sealed(30, 60), *chunks[6:]]
    assert walk.queried == [0]
    # Not all of the tail held: the walk queries from the first it lacks, bounded by reach.
    walk = Walk()
    walk.store.recent.remember("i", chunks[6:8])
    walk.items = [sealed(0, 60), *chunks[6:]]
    got = list(walk.store._chunks(Segment("i", 0, 100), 0, reach=1000, sealed=60))
    assert got == [sealed(0, 60), *chunks[6:]]
    assert walk.queried == [0, 80, 1000 + INLINE_MAX]


def test_sealed_history_grown_past_the_stream_items_hint_is_queried_on() -> None:
    """The sealer grew a segment past where the stream item (read before) says sealed history
    ends, and collected what it replaced: the walk queries on from where it stands."""
    walk = Walk()
    walk.items = [sealed(0, 30), sealed(30, 90)]
    got = list(walk.store._chunks(Segment("i", 0, 100), 0, reach=1000, sealed=60))
    assert got == [sealed(0, 30), sealed(30, 90)] and walk.queried == [0, 30]
