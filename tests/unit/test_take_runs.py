"""`take_runs`: how much of a sealed segment's pages one response takes, checked against the
rules on many random layouts: whole appends that fit the budget, the first one however large
(cut to the budget), a start inside an append moved to its start when asked, and pages whose
appends are not recorded cut anywhere."""

from __future__ import annotations

import random

import pytest

from durable_streams_aws.core.storage._chunks import Span, _Run, take_runs


def layout(rng: random.Random, start: int) -> tuple[list[_Run], list[int], list[int]]:
    """Consecutive runs of random bytes, some with their appends recorded; the stream's bytes
    are position-valued (`position % 251`), so any slice is easy to check. Returns the runs,
    the append boundaries known, and the positions inside runs whose appends are unknown."""
    runs: list[_Run] = []
    known: list[int] = [start]
    loose: list[int] = []
    position = start
    for _ in range(rng.randint(1, 4)):
        lengths = tuple(rng.choice([1, 2, 5, 9, 30]) for _ in range(rng.randint(1, 5)))
        size = sum(lengths)
        data = bytes(p % 251 for p in range(position, position + size))
        if rng.random() < 0.3:
            runs.append(_Run(position, data))
            loose.extend(range(position, position + size + 1))
        else:
            runs.append(_Run(position, data, lengths))
            for length in lengths:
                position += length
                known.append(position)
            continue
        position += size
        known.append(position)
    return runs, known, loose


def expected_bytes(begin: int, end: int) -> bytes:
    return bytes(p % 251 for p in range(begin, end))


@pytest.mark.parametrize("seed", range(400))
def test_take_runs_follows_the_rules(seed: int) -> None:
    rng = random.Random(seed)
    start = rng.choice([0, 10, 1000])
    runs, known, loose = layout(rng, start)
    end = runs[-1].end
    lo = rng.randrange(start, end)
    hi = rng.randint(lo + 1, end)
    span = Span(
        floor=start,
        lo=lo,
        hi=hi,
        budget=rng.choice([1, 3, 8, 20, 100]),
        first=rng.random() < 0.7,
        snap=rng.random() < 0.5,
    )
    taken, begin, position, budget = take_runs(runs, span)
    clean = set(known) | set(loose) | {hi}  # the caller's bound ends an append (a fork point)
    lo_is_loose = lo in loose and lo not in known
    # Where the batch begins: `lo`, or the start of the recorded append holding it.
    if span.snap and not lo_is_loose and lo not in known:
        assert begin == max(b for b in known if b <= lo)
    else:
        assert begin == lo
    if taken is None:
        assert position == lo and budget == span.budget
        assert not span.first, "the first item of a response always gives something"
        return
    assert taken.data == expected_bytes(begin, position)
    assert begin < position <= hi
    assert budget == span.budget - (position - begin)
    assert set(taken.ends) <= clean and all(begin < e <= position for e in taken.ends)
    if position in known or position == hi or position in loose:
        pass  # a clean end (or the caller's bound)
    else:
        # Cut inside an append: only the response's first, and only to the budget.
        assert span.first and position - begin == span.budget
        assert not any(begin < b < position for b in known), "a cut past a whole append"
    if span.budget >= position - begin and position < hi and position in known:
        # It stopped between appends: the next one (or the budget) did not fit.
        following = min(b for b in known if b > position)
        assert following - position > budget or following > hi
