"""The sealing decision: what to seal, what is already covered, what to leave alone."""

from __future__ import annotations

import itertools

import pytest

from durable_streams_aws.core.storage._seal_plan import SealPolicy, Stored, cut_here, marks, plan

POLICY = SealPolicy(segment_bytes=100, hot_bytes=30, page_bytes=50)


def chunks(*bounds: int) -> list[Stored]:
    return [Stored(a, b, sealed=False) for a, b in itertools.pairwise(bounds)]


def segment(start: int, end: int) -> Stored:
    return Stored(start, end, sealed=True, key=f"seg-{start}-{end}")


def span(run: tuple[Stored, ...]) -> tuple[int, int] | None:
    return (run[0].start, run[-1].end) if run else None


def test_an_open_stream_keeps_its_hot_tail() -> None:
    stored = chunks(0, 40, 80, 120, 160, 200, 240, 250)
    decided = plan(stored, origin=0, tail=250, closed=False, policy=POLICY)
    # Sealable up to 220 (250 - 30): the chunks ending at 40..200.
    assert span(decided.run) == (0, 200) and len(decided.run) == 5
    assert decided.redundant == () and decided.sealed_to == 200


def test_a_closed_stream_is_sealed_to_its_tail() -> None:
    decided = plan(chunks(0, 10, 20, 25), origin=0, tail=25, closed=True, policy=POLICY)
    assert span(decided.run) == (0, 25) and decided.sealed_to == 25


def test_items_past_the_tail_read_are_left_alone() -> None:
    decided = plan(chunks(0, 10, 20, 30), origin=0, tail=20, closed=True, policy=POLICY)
    assert span(decided.run) == (0, 20)


def test_full_segments_stay_and_a_short_last_one_grows() -> None:
    stored = [segment(0, 100), segment(100, 130), *chunks(130, 160, 190, 250)]
    decided = plan(stored, origin=0, tail=250, closed=True, policy=POLICY)
    assert span(decided.run) == (100, 250)
    assert decided.run[0] == segment(100, 130)


def test_chunks_inside_a_segment_are_redundant_whatever_a_crash_left() -> None:
    # A sealer wrote segment [0, 60) at key 60 and died before deleting the chunks before it.
    stored = [*chunks(0, 20, 40), segment(0, 60), *chunks(60, 70)]
    decided = plan(stored, origin=0, tail=70, closed=True, policy=POLICY)
    assert {(x.start, x.end) for x in decided.redundant} == {(0, 20), (20, 40)}
    assert span(decided.run) == (60, 70)  # [0, 60) is over half the target: it stays


def test_a_segment_inside_a_larger_one_is_redundant() -> None:
    stored = [segment(0, 30), segment(30, 60), segment(0, 90)]
    decided = plan(stored, origin=0, tail=90, closed=True, policy=POLICY)
    assert {x.key for x in decided.redundant} == {"seg-0-30", "seg-30-60"}
    assert decided.run == () and decided.sealed_to == 90


def test_a_fork_seals_only_its_own_data_from_its_fork_position() -> None:
    decided = plan(chunks(500, 520, 540), origin=500, tail=540, closed=True, policy=POLICY)
    assert span(decided.run) == (500, 540)
    nothing = plan([], origin=500, tail=500, closed=True, policy=POLICY)
    assert nothing.run == () and nothing.sealed_to == 500


def test_nothing_after_a_gap_is_sealed() -> None:
    decided = plan([*chunks(0, 10), *chunks(20, 30)], 0, 30, closed=True, policy=POLICY)
    assert span(decided.run) == (0, 10)


@pytest.mark.parametrize(
    ("size", "fill", "expected"),
    [
        (99, 0, False),  # under the target
        (100, 0, True),  # the last page is complete
        (120, 10, False),  # a page half full: wait for one that ends full
        (120, 49, True),  # within 1/32 of a page of full (page 50: 49 or more)
        (199, 10, False),
        (200, 10, True),  # two pages past the target: cut anyway
    ],
)
def test_segments_end_where_a_page_ends_full(size: int, fill: int, expected: bool) -> None:
    assert cut_here(size, fill, POLICY) is expected


def test_nothing_to_do_on_a_sealed_stream() -> None:
    decided = plan([segment(0, 100), segment(100, 200)], 0, 200, closed=True, policy=POLICY)
    assert decided.run == () and decided.redundant == () and decided.sealed_to == 200


@pytest.mark.parametrize(
    ("before", "after", "closing", "quantum", "expected"),
    [
        (0, 10, False, 100, False),
        (95, 105, False, 100, True),
        (100, 199, False, 100, False),
        (100, 100, True, 100, True),  # a close always marks
        (5, 6, False, 0, True),  # quantum 0: every commit with data
        (5, 5, False, 0, False),
    ],
)
def test_commits_mark_a_stream_each_quantum_and_on_close(
    before: int, after: int, closing: bool, quantum: int, expected: bool
) -> None:
    assert marks(before, after, closing, quantum) is expected


def test_policy_sizes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SealPolicy(segment_bytes=0)


def void(start: int, end: int) -> Stored:
    return Stored(start, end, sealed=False, void=True)


def test_a_segment_never_spans_a_void_chunk() -> None:
    """A void chunk (a reserved range that holds nothing) ends a run; the next plan seals
    what follows it, and a void counts as nothing left to seal."""
    stored = [*chunks(0, 10, 20), void(20, 35), *chunks(35, 50, 60)]
    decided = plan(stored, origin=0, tail=60, closed=True, policy=POLICY)
    assert span(decided.run) == (0, 20) and decided.more
    after = [segment(0, 20), void(20, 35), *chunks(35, 50, 60)]
    decided = plan(after, origin=0, tail=60, closed=True, policy=POLICY)
    assert span(decided.run) == (35, 60) and not decided.more
    sealed = [segment(0, 20), void(20, 35), segment(35, 60)]
    decided = plan(sealed, origin=0, tail=60, closed=True, policy=POLICY)
    assert decided.run == () and decided.sealed_to == 60


def test_a_short_segment_before_a_void_is_not_grown_across_it() -> None:
    stored = [segment(0, 10), void(10, 20), *chunks(20, 30)]
    decided = plan(stored, origin=0, tail=30, closed=True, policy=POLICY)
    assert span(decided.run) == (20, 30)
    stored = [void(0, 5), *chunks(5, 30)]
    decided = plan(stored, origin=0, tail=30, closed=True, policy=POLICY)
    assert span(decided.run) == (5, 30)


def test_a_void_inside_a_larger_void_does_not_stop_sealing() -> None:
    stored = [*chunks(0, 10), void(20, 25), void(10, 30), *chunks(30, 40, 50)]
    decided = plan(stored, origin=0, tail=50, closed=True, policy=POLICY)
    assert span(decided.run) == (0, 10) and decided.more
    after = [segment(0, 10), void(20, 25), void(10, 30), *chunks(30, 40, 50)]
    decided = plan(after, origin=0, tail=50, closed=True, policy=POLICY)
    assert span(decided.run) == (30, 50)
