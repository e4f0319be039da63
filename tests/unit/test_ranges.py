"""Reserved ranges, the pure part: where readable data ends above the published tail, which
numbered ranges a gap holds, and when a gap may be voided."""

from __future__ import annotations

import itertools
import random

import pytest

from durable_streams_aws.core.storage._ranges import Gap, Placed, resolve, void_due


def test_contiguous_items_are_readable_to_the_reserved_end() -> None:
    placed = [Placed(10, 20, 3), Placed(20, 25, 4), Placed(25, 40, 5)]
    resolution = resolve(10, 2, 40, 5, placed)
    assert (resolution.readable, resolution.readable_number, resolution.gap) == (40, 5, None)


def test_a_gap_stops_the_readable_part_and_names_its_ranges() -> None:
    # Ranges 3 and 4 ([10, 30)) pending, range 5 filled past them.
    resolution = resolve(10, 2, 40, 5, [Placed(30, 40, 5)])
    assert resolution.readable == 10 and resolution.readable_number == 2
    assert resolution.gap == Gap(10, 30, (3, 4))


def test_the_newest_ranges_past_the_last_item_are_pending() -> None:
    resolution = resolve(0, 0, 50, 4, [Placed(0, 10, 1), Placed(10, 20, 2)])
    assert resolution.readable == 20 and resolution.gap == Gap(20, 50, (3, 4))


def test_a_void_item_counts_as_readable_nothing() -> None:
    placed = [Placed(0, 10, 1), Placed(10, 30, 3, void=True, first_number=2), Placed(30, 35, 4)]
    resolution = resolve(0, 0, 35, 4, placed)
    assert (resolution.readable, resolution.readable_number, resolution.gap) == (35, 4, None)


def test_items_at_or_below_the_published_tail_are_passed_over() -> None:
    placed = [Placed(0, 10, 1), Placed(10, 20, 2), Placed(20, 30, 3)]
    assert resolve(20, 2, 30, 3, placed).readable == 30


@pytest.mark.parametrize("seed", range(200))
def test_readable_is_the_longest_filled_prefix_of_any_history(seed: int) -> None:
    """Random reservations, each filled, voided or pending: the readable end is the end of
    the longest run from the published tail made only of filled or voided ranges, and the
    gap lists exactly the ranges up to the next resolved one; so does every gap after it."""
    rng = random.Random(seed)
    lengths = [rng.randint(1, 9) for _ in range(rng.randint(1, 12))]
    bounds = [0, *itertools.accumulate(lengths)]
    state = [rng.choice(["filled", "void", "pending"]) for _ in lengths]
    published_at = rng.randint(0, len(lengths))
    for index in range(published_at):
        state[index] = rng.choice(["filled", "void"])
    placed = []
    index = published_at
    while index < len(lengths):
        if state[index] == "pending":
            index += 1
            continue
        if state[index] == "filled":
            placed.append(Placed(bounds[index], bounds[index + 1], index + 1))
            index += 1
            continue
        run = index  # a void item covers one or more voided ranges in a row
        while run + 1 < len(lengths) and state[run + 1] == "void" and rng.random() < 0.5:
            run += 1
        placed.append(Placed(bounds[index], bounds[run + 1], run + 1, True, index + 1))
        index = run + 1
    resolution = resolve(bounds[published_at], published_at, bounds[-1], len(lengths), placed)
    first_pending = next(
        (i for i in range(published_at, len(lengths)) if state[i] == "pending"), len(lengths)
    )
    assert resolution.readable == bounds[first_pending]
    if first_pending == len(lengths):
        assert resolution.gap is None
    else:
        assert resolution.gap is not None
        next_resolved = next(
            (i for i in range(first_pending, len(lengths)) if state[i] != "pending"),
            len(lengths),
        )
        assert resolution.gap.start == bounds[first_pending]
        assert resolution.gap.numbers == tuple(range(first_pending + 1, next_resolved + 1))
        assert resolution.gap.end == bounds[next_resolved]
    # Every run of pending ranges is a gap, in order, the ones above the first too.
    runs = [
        list(group)
        for pending, group in itertools.groupby(
            range(published_at, len(lengths)), key=lambda i: state[i] == "pending"
        )
        if pending
    ]
    expected = [Gap(bounds[run[0]], bounds[run[-1] + 1], tuple(i + 1 for i in run)) for run in runs]
    assert list(resolution.gaps) == expected


def test_a_gap_is_voided_once_seen_long_enough_or_once_nothing_was_reserved_lately() -> None:
    assert not void_due(first_seen=100, last_reserved_at=99.5, now=101, after=2)
    assert void_due(first_seen=100, last_reserved_at=101.5, now=102, after=2)
    assert void_due(first_seen=103, last_reserved_at=100, now=103, after=2)


def test_a_void_inside_a_larger_void_changes_nothing() -> None:
    """A reader voided [0, 30); the writer of [10, 20) then voided its own range inside it.
    Sorted by their ends the inner one comes first: it must not look like a gap at 0."""
    placed = [
        Placed(10, 20, 2, void=True, first_number=2),
        Placed(0, 30, 3, void=True, first_number=1),
        Placed(30, 40, 4),
    ]
    resolution = resolve(0, 0, 40, 4, placed)
    assert (resolution.readable, resolution.readable_number, resolution.gap) == (40, 4, None)
