"""Reading ahead (`core.storage._read_ahead`): which objects are fetched ahead (only those the
read takes whole, by its own rules: separators counted for JSON, skipped and cut chunks left
alone), that they are fetched at once, that chunks are pulled no further than the read would
pull them, and that a failed fetch is raised where its chunk is taken."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from itertools import pairwise

import pytest

from durable_streams_aws.core.storage._chunk_layout import Chunk, ObjectGone
from durable_streams_aws.core.storage._read_ahead import READ_AHEAD_OBJECTS, ReadPlan, read_ahead
from durable_streams_aws.core.storage._segments import Page


def in_s3(start: int, end: int, messages: int | None = None) -> Chunk:
    lengths = None if messages is None else (1,) * messages
    return Chunk(start, end, None, f"k{start}", lengths, None)


def inline(start: int, end: int) -> Chunk:
    return Chunk(start, end, b"i" * (end - start), None, None, None)


def void(start: int, end: int) -> Chunk:
    return Chunk(start, end, None, None, None, None, void=True)


def plan(at: int, budget: int, end: int = 10_000, json_mode: bool = False) -> ReadPlan:
    return ReadPlan(at, budget, end, json_mode)


class Objects:
    """S3 as the read sees it: each object's bytes, and the keys fetched ahead."""

    def __init__(self, gone: set[str] | None = None) -> None:
        self.fetched: list[str] = []
        self.gone = gone or set()

    def fetch(self, key: str) -> bytes:
        self.fetched.append(key)
        if key in self.gone:
            raise ObjectGone(key)
        return key.encode()


def counted(chunks: list[Chunk], pulled: list[int]) -> Iterator[Chunk]:
    for chunk in chunks:
        pulled.append(chunk.start)
        yield chunk


def test_the_chunks_after_the_first_are_fetched_ahead_while_the_read_takes_them_whole() -> None:
    chunks = [in_s3(0, 10), in_s3(10, 20), inline(20, 30), in_s3(30, 40), in_s3(40, 50)]
    objects = Objects()
    out = list(read_ahead(iter(chunks), objects.fetch, plan(0, 45)))
    assert [(c.start, c.end) for c in out] == [(c.start, c.end) for c in chunks]
    # The first is the read's own GET, as before; the last does not fit what is left.
    assert [c.inline for c in out] == [None, b"k10", b"i" * 10, b"k30", None]
    assert sorted(objects.fetched) == ["k10", "k30"]


def test_json_counts_a_separator_per_message() -> None:
    # Ten chunks of 100 one-byte messages: 200 of the budget each, not 100.
    chunks = [in_s3(100 * i, 100 * i + 100, messages=100) for i in range(10)]
    objects, pulled = Objects(), []
    ahead = read_ahead(counted(chunks, pulled), objects.fetch, plan(0, 599, json_mode=True))
    assert next(ahead).start == 0 and pulled == [0, 100, 200]
    assert [c.inline for c in ahead][:2] == [b"k100", None]
    assert objects.fetched == ["k100"]
    # Without its message count in the item (lengths in S3), a chunk's cost is not known.
    unknown = [in_s3(0, 10, 3), Chunk(10, 20, None, "k10", None, "k10.idx"), in_s3(20, 30, 3)]
    objects, pulled = Objects(), []
    assert (
        len(list(read_ahead(counted(unknown, pulled), objects.fetch, plan(0, 100, json_mode=True))))
        == 3
    )
    assert objects.fetched == []


SEGMENT = Chunk(10, 20, None, "seg", None, None, pages=())


def segment(start: int, end: int, page_bytes: int, messages_per_page: int = 0) -> Chunk:
    """A sealed segment of [start, end) in pages of `page_bytes` (the last one shorter)."""
    bounds = [*range(start, end, page_bytes), end]
    pages = tuple(Page(lo, hi, messages_per_page, lo - start) for lo, hi in pairwise(bounds))
    return Chunk(start, end, None, f"seg{start}", None, None, pages=pages)


def test_the_chunks_after_a_segment_the_read_takes_whole_are_fetched_ahead() -> None:
    # A catch-up read from an open stream's sealed history into its newest appends.
    chunks = [segment(0, 100, 30), in_s3(100, 110), in_s3(110, 120), in_s3(120, 130)]
    objects, pulled = Objects(), []
    out = list(read_ahead(counted(chunks, pulled), objects.fetch, plan(0, 1_000)))
    assert [c.start for c in out] == [0, 100, 110, 120]
    # The segment is the read's own (ranged GETs of its pages); every chunk after it is
    # fetched ahead, the first one included, since the read is busy with the segment.
    assert [c.inline for c in out] == [None, b"k100", b"k110", b"k120"]
    assert sorted(objects.fetched) == ["k100", "k110", "k120"]
    # From a page's start inside it (where a read before this one stopped): the rest of it.
    chunks = [segment(0, 100, 30), in_s3(100, 110), in_s3(110, 120)]
    objects = Objects()
    out = list(read_ahead(iter(chunks), objects.fetch, plan(60, 40 + 20)))
    assert [c.inline for c in out] == [None, b"k100", b"k110"]
    objects = Objects()  # a budget that the rest of it and one chunk spend
    out = list(read_ahead(iter(chunks), objects.fetch, plan(60, 40 + 10)))
    assert [c.inline for c in out] == [None, b"k100", None]
    # Two segments one after the other are passed over alike.
    chunks = [segment(0, 50, 30), segment(50, 100, 30), in_s3(100, 110)]
    objects = Objects()
    assert [c.inline for c in read_ahead(iter(chunks), objects.fetch, plan(0, 1_000))] == [
        None,
        None,
        b"k100",
    ]


def test_a_json_segment_costs_a_separator_per_message() -> None:
    # 100 bytes in pages of 30 bytes and 10 messages: 140 of the budget, not 100.
    chunks = [segment(0, 100, 30, messages_per_page=10), in_s3(100, 110, 5)]
    for budget, fetched in [(139 + 15, []), (140 + 15, ["k100"])]:
        objects = Objects()
        list(read_ahead(iter(chunks), objects.fetch, plan(0, budget, json_mode=True)))
        assert objects.fetched == fetched
    objects = Objects()  # a byte stream's pages cost their bytes
    list(read_ahead(iter(chunks), objects.fetch, plan(0, 110)))
    assert objects.fetched == ["k100"]


@pytest.mark.parametrize(
    ("first", "at"),
    [
        (segment(0, 100, 30), 5),  # the read starts inside a page of it
        (Chunk(0, 100, None, "seg0", None, None, pages=segment(0, 90, 30).pages), 0),  # short
        (Chunk(0, 100, None, "seg0", None, None, pages=segment(10, 100, 30).pages), 0),  # late
    ],
)
def test_a_segment_not_taken_whole_from_its_start_ends_the_prediction(
    first: Chunk, at: int
) -> None:
    chunks = [first, in_s3(100, 110), in_s3(110, 120)]
    objects, pulled = Objects(), []
    ahead = read_ahead(counted(chunks, pulled), objects.fetch, plan(at, 1_000))
    next(ahead)
    assert pulled == [0]  # nothing pulled past it
    assert [c.inline for c in ahead] == [None, None] and objects.fetched == []


@pytest.mark.parametrize(
    ("chunks", "read", "met"),
    [
        ([in_s3(0, 10), in_s3(10, 20), in_s3(20, 30)], plan(5, 100), 1),  # starts inside
        ([in_s3(0, 10), in_s3(20, 30), in_s3(30, 40)], plan(0, 100), 2),  # skipped (replaced)
        ([in_s3(0, 10), void(10, 20), in_s3(20, 30)], plan(0, 100), 2),  # a void range
        ([in_s3(0, 10), SEGMENT, in_s3(20, 30)], plan(0, 100), 2),  # a segment
        ([in_s3(0, 10), in_s3(10, 25), in_s3(25, 30)], plan(0, 100, end=20), 2),  # past the end
        ([in_s3(0, 10), in_s3(10, 30), in_s3(30, 40)], plan(0, 15), 2),  # cut by the budget
    ],
)
def test_the_prediction_ends_where_the_read_may_not_take_a_chunk_whole(
    chunks: list[Chunk], read: ReadPlan, met: int
) -> None:
    objects, pulled = Objects(), []
    ahead = read_ahead(counted(chunks, pulled), objects.fetch, read)
    next(ahead)
    assert pulled == [c.start for c in chunks[:met]]  # up to that chunk, no further
    assert objects.fetched == []  # and nothing fetched
    assert len(list(ahead)) == len(chunks) - 1


def test_the_objects_are_fetched_at_once() -> None:
    together = threading.Barrier(4, timeout=5)

    def fetch(key: str) -> bytes:
        together.wait()  # breaks (an error) unless four fetches are under way together
        return key.encode()

    chunks = [in_s3(10 * i, 10 * i + 10) for i in range(6)]
    out = [c.inline for c in read_ahead(iter(chunks), fetch, plan(0, 50))]
    assert out == [None, b"k10", b"k20", b"k30", b"k40", None]


def test_chunks_are_pulled_no_further_than_the_read_would() -> None:
    chunks = [in_s3(10 * i, 10 * i + 10) for i in range(30)]
    pulled: list[int] = []
    objects = Objects()
    ahead = read_ahead(counted(chunks, pulled), objects.fetch, plan(0, 30))
    assert next(ahead).start == 0
    # The budget is spent at 30: the read takes 0..30 and stops, pulling nothing past it.
    assert pulled == [0, 10, 20]
    assert [c.inline for c in ahead][:3] == [b"k10", b"k20", None]
    assert sorted(objects.fetched) == ["k10", "k20"]
    pulled.clear()
    ahead = read_ahead(counted(chunks, pulled), Objects().fetch, plan(0, 10_000))
    next(ahead)
    assert len(pulled) == READ_AHEAD_OBJECTS  # at most this many ahead of the one taken
    assert [c.start for c in ahead] == [c.start for c in chunks[1:]]


def test_an_object_gone_is_raised_where_its_chunk_is_taken() -> None:
    chunks = [in_s3(0, 10), in_s3(10, 20), in_s3(20, 30)]
    ahead = read_ahead(iter(chunks), Objects(gone={"k20"}).fetch, plan(0, 100))
    assert next(ahead).start == 0 and next(ahead).inline == b"k10"
    with pytest.raises(ObjectGone) as raised:
        next(ahead)
    assert raised.value.key == "k20"


def test_a_read_that_stops_early_does_not_wait_for_the_fetches_ahead() -> None:
    release = threading.Event()

    def slow(key: str) -> bytes:
        release.wait(10)  # still under way when the read stops
        return key.encode()

    chunks = [in_s3(10 * i, 10 * i + 10) for i in range(READ_AHEAD_OBJECTS + 4)]
    ahead = read_ahead(iter(chunks), slow, plan(0, 10_000))
    try:
        assert next(ahead).inline is None  # the read's own GET
        stopped = time.monotonic()
        ahead.close()  # the read took what it needed
        assert time.monotonic() - stopped < 5
    finally:
        release.set()
