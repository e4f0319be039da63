"""How a read walks what this process knows of a stream (`ChunkStore._chunks`): the sealed
segments it knows answer their positions first, cached chunks the rest, and where neither
holds the next position the read queries DynamoDB. The walk takes cached chunks a run at a
time; what it meets must be what a walk asking both caches at every position meets. Pure: no
AWS (the query is a stand-in that answers from a list of items and records where it was
asked to start)."""

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
    """A store with no AWS behind it: its query answers from `items` (nothing, unless a test
    puts some there) and records where it began."""

    def __init__(self) -> None:
        self.store = ChunkStore(None, None, "t", "b", INLINE_MAX)
        self.queried: list[int] = []
        self.items: list[Chunk] = []  # what the table holds, in order of their ends
        self.store._query_chunks = self._query  # type: ignore[method-assign]

    def _query(
        self, segment: Segment, position: int, up_to: int | None = None, paged: bool = False
    ) -> Iterator[Chunk]:
        self.queried.append(position)
        last = float("inf") if up_to is None else up_to
        return iter([c for c in self.items if position < c.end <= last])


def reference(store: ChunkStore, segment: Segment, position: int) -> tuple[list[Chunk], int | None]:
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
            met, query_at = reference(walk.store, segment, position)
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
    walk.items = [sealed(0, 30), sealed(30, 100)]  # the chunks it holds are sealed history
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


def test_a_tail_not_held_is_queried_with_sealed_history() -> None:
    """Holding nothing after sealed history, the walk queries once, on through the tail, as
    the items come (not a second Query for the tail)."""
    walk = Walk()
    walk.store.recent.remember("i", [inline(70, 80)])  # held, but not where the tail starts
    walk.items = [sealed(0, 60), inline(60, 70), inline(70, 80)]
    got = list(walk.store._chunks(Segment("i", 0, 80), 0, reach=1000, sealed=60))
    assert got == walk.items and walk.queried == [0]


def test_sealed_history_grown_past_the_stream_items_hint_is_queried_on() -> None:
    """The sealer grew a segment past where the stream item (read before) says sealed history
    ends, and collected what it replaced: the walk queries on from where it stands."""
    walk = Walk()
    walk.store.recent.remember("i", [inline(60, 70)])
    walk.items = [sealed(0, 30), sealed(30, 90)]
    got = list(walk.store._chunks(Segment("i", 0, 100), 0, reach=1000, sealed=60))
    assert got == [sealed(0, 30), sealed(30, 90)] and walk.queried == [0, 60]


def test_a_chunk_a_segment_replaced_neither_moves_the_walk_on_nor_comes_twice() -> None:
    """Still in the table, a chunk a grown segment replaced is passed over (the read does not
    stand in it), so the walk does not take it for where the read stands and skip the segment
    that holds that position; and it comes once, whether the walk queries on or not."""
    items = [sealed(0, 30), inline(40, 50), sealed(30, 90)]
    for hint in (50, 60):
        walk = Walk()
        walk.store.recent.remember("i", [inline(n, n + 10) for n in range(hint, 100, 10)])
        walk.items = items
        got = list(walk.store._chunks(Segment("i", 0, 100), 0, reach=1000, sealed=hint))
        assert got[:3] == items, hint
        ends = [c.end for c in got]
        assert ends == sorted(set(ends)), hint  # in order of their ends, none twice
