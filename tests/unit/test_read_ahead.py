"""Reading ahead (`core.storage._read_ahead`): which objects are fetched ahead, that they are
fetched at once, that the read pulls its chunks no further than it would itself, and that a
failed fetch is raised where its chunk is taken."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from durable_streams_aws.core.storage._chunk_layout import Chunk, ObjectGone
from durable_streams_aws.core.storage._read_ahead import READ_AHEAD_OBJECTS, read_ahead


def in_s3(start: int, end: int, key: str | None = None) -> Chunk:
    return Chunk(start, end, None, key or f"k{start}", None, None)


def inline(start: int, end: int) -> Chunk:
    return Chunk(start, end, b"i" * (end - start), None, None, None)


class Objects:
    """S3 as the read sees it: each object's bytes, and the keys fetched."""

    def __init__(self, gone: set[str] | None = None) -> None:
        self.fetched: list[str] = []
        self.gone = gone or set()

    def fetch(self, key: str) -> bytes:
        self.fetched.append(key)
        if key in self.gone:
            raise ObjectGone(key)
        return key.encode()


def pulled(chunks: list[Chunk], counter: list[int]) -> Iterator[Chunk]:
    for chunk in chunks:
        counter.append(chunk.start)
        yield chunk


def test_only_objects_taken_whole_are_fetched_ahead() -> None:
    void = Chunk(40, 50, None, None, None, None, void=True)
    chunks = [
        in_s3(0, 10),  # starts before the read: it takes part of it, by a ranged GET
        in_s3(10, 20),
        inline(20, 30),
        in_s3(30, 40),
        void,
        in_s3(50, 60),
        in_s3(60, 75),  # ends past the budget: it may be cut
    ]
    objects = Objects()
    out = list(read_ahead(iter(chunks), objects.fetch, 5, 70))
    assert [(c.start, c.end) for c in out] == [(c.start, c.end) for c in chunks]
    assert [c.inline for c in out] == [None, b"k10", b"i" * 10, b"k30", None, b"k50", None]
    assert sorted(objects.fetched) == ["k10", "k30", "k50"]


def test_void_and_sealed_chunks_are_never_fetched_ahead() -> None:
    chunks = [
        Chunk(0, 10, None, "v", None, None, void=True),
        Chunk(0, 10, None, "seg", None, None, pages=()),
    ]
    objects = Objects()
    for chunk in chunks:
        assert list(read_ahead(iter([chunk]), objects.fetch, 0, 100)) == [chunk]
    assert objects.fetched == []


def test_the_objects_are_fetched_at_once() -> None:
    together = threading.Barrier(4, timeout=5)

    def fetch(key: str) -> bytes:
        together.wait()  # breaks (an error) unless four fetches are under way together
        return key.encode()

    chunks = [in_s3(10 * i, 10 * i + 10) for i in range(4)]
    assert [c.inline for c in read_ahead(iter(chunks), fetch, 0, 100)] == [
        b"k0",
        b"k10",
        b"k20",
        b"k30",
    ]


def test_chunks_are_pulled_no_further_than_the_read_would() -> None:
    chunks = [in_s3(10 * i, 10 * i + 10) for i in range(30)]
    counter: list[int] = []
    ahead = read_ahead(pulled(chunks, counter), Objects().fetch, 0, 35)
    assert [c.start for c in ahead] == [c.start for c in chunks]
    # Pulling stops at the chunk the budget ends in (30..40) until the read takes it.
    counter.clear()
    objects = Objects()
    ahead = read_ahead(pulled(chunks, counter), objects.fetch, 0, 35)
    assert next(ahead).start == 0
    assert counter == [0, 10, 20, 30] and sorted(objects.fetched) == ["k0", "k10", "k20"]
    # Within the budget, at most READ_AHEAD_OBJECTS are pulled ahead of the one taken.
    counter.clear()
    ahead = read_ahead(pulled(chunks, counter), Objects().fetch, 0, 10_000)
    next(ahead)
    assert len(counter) == READ_AHEAD_OBJECTS
    # At a void range (where a read holding data ends) pulling stops too.
    counter.clear()
    with_void = [in_s3(0, 10), Chunk(10, 20, None, None, None, None, void=True), in_s3(20, 30)]
    next(read_ahead(pulled(with_void, counter), Objects().fetch, 0, 100))
    assert counter == [0, 10]


def test_an_object_gone_is_raised_where_its_chunk_is_taken() -> None:
    chunks = [in_s3(0, 10), in_s3(10, 20), in_s3(20, 30)]
    ahead = read_ahead(iter(chunks), Objects(gone={"k10"}).fetch, 0, 100)
    assert next(ahead).inline == b"k0"
    with pytest.raises(ObjectGone) as raised:
        next(ahead)
    assert raised.value.key == "k10"


def test_a_read_that_stops_early_does_not_wait_for_the_fetches_ahead() -> None:
    release = threading.Event()

    def slow(key: str) -> bytes:
        if key != "k0":
            release.wait(10)  # still under way when the read stops
        return key.encode()

    chunks = [in_s3(10 * i, 10 * i + 10) for i in range(READ_AHEAD_OBJECTS + 4)]
    ahead = read_ahead(iter(chunks), slow, 0, 10_000)
    try:
        assert next(ahead).inline == b"k0"
        stopped = time.monotonic()
        ahead.close()  # the read took what it needed
        assert time.monotonic() - stopped < 5
    finally:
        release.set()
