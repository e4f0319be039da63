"""A partition's reads made one ahead of their conversion (`pipeline._fetch_ahead`): the same
items in the same order, failures where they happened, the next read under way while the
caller holds the one before, never more than one ahead, and an early stop that waits for
nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from durable_streams_aws.pipeline._fetch_ahead import fetched_ahead

WAIT = 10.0  # seconds: only a broken implementation waits this long


def test_the_items_in_order() -> None:
    assert list(fetched_ahead(iter(range(100)))) == list(range(100))
    assert list(fetched_ahead(iter([]))) == []


def test_a_failure_is_raised_where_its_item_would_have_come() -> None:
    def items() -> Iterator[int]:
        yield 1
        yield 2
        raise LookupError("the third read failed")

    taken = []
    with pytest.raises(LookupError, match="third"):
        for item in fetched_ahead(items()):
            taken.append(item)
    assert taken == [1, 2]


def test_the_next_item_is_fetched_while_the_caller_holds_the_one_before() -> None:
    second_asked = threading.Event()

    def items() -> Iterator[str]:
        yield "first"
        second_asked.set()
        yield "second"

    reads = fetched_ahead(items())
    assert next(reads) == "first"
    # Read in order, the second would only be asked for when the caller asks again.
    assert second_asked.wait(WAIT)
    assert next(reads) == "second"


def test_never_more_than_one_ahead() -> None:
    made: list[int] = []

    def items() -> Iterator[int]:
        for n in range(10):
            made.append(n)
            yield n

    reads = fetched_ahead(items())
    for taken in range(5):
        assert next(reads) == taken
        time.sleep(0.05)  # room for a runaway reader to go further
        assert len(made) <= taken + 2
    assert list(reads) == list(range(5, 10))


def test_stopping_early_waits_for_no_read_and_starts_no_other() -> None:
    asked, release, closed = threading.Event(), threading.Event(), threading.Event()
    went_on: list[int] = []

    def items() -> Iterator[int]:
        try:
            yield 1
            asked.set()
            release.wait(WAIT)  # a read that takes long
            yield 2
            went_on.append(3)
            yield 3
        finally:
            closed.set()

    reads = fetched_ahead(items())
    assert next(reads) == 1
    assert asked.wait(WAIT)
    started = time.monotonic()
    reads.close()
    assert time.monotonic() - started < WAIT / 2
    release.set()
    assert closed.wait(WAIT)  # the read under way ended, and the items were closed
    assert went_on == []


def test_stopping_before_the_next_read_starts_closes_the_items() -> None:
    closed = threading.Event()

    def items() -> Iterator[int]:
        try:
            yield from range(10)
        finally:
            closed.set()

    reads = fetched_ahead(items())
    assert next(reads) == 0
    reads.close()
    assert closed.wait(WAIT)


def test_the_reading_thread_is_a_daemon() -> None:
    """A Spark worker that exits while a read is under way does not wait for it."""
    seen: list[bool] = []

    def items() -> Iterator[int]:
        seen.append(threading.current_thread().daemon)
        yield 1

    assert list(fetched_ahead(items())) == [1]
    assert seen == [True]
