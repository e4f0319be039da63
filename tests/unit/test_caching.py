"""ETags and Cache-Control for reads (PROTOCOL.md section 10.1)."""

from __future__ import annotations

import itertools

import pytest

from durable_streams_aws.core.protocol.caching import (
    EVENT_STREAM,
    NO_STORE,
    CacheRules,
    ReadMode,
    ReadShape,
    etag,
    etag_matches,
    read_cache_control,
)

# ---------------------------------------------------------------- etag


@pytest.mark.parametrize(
    ("incarnation", "start", "end", "closed", "expected"),
    [
        ("inc", 0, 0, False, '"inc:0:0"'),
        ("inc", 0, 10, False, '"inc:0:10"'),
        ("inc", 0, 10, True, '"inc:0:10:c"'),
        ("abc123", 5, 5, True, '"abc123:5:5:c"'),
    ],
)
def test_etag_format(incarnation: str, start: int, end: int, closed: bool, expected: str) -> None:
    assert etag(incarnation, start, end, closed) == expected


@pytest.mark.parametrize(
    "args", [("inc", 0, 0, False), ("inc", 3, 9, True), ("x-y_z", 10**12, 10**12 + 5, False)]
)
def test_etag_is_a_quoted_string(args: tuple[str, int, int, bool]) -> None:
    tag = etag(*args)
    assert tag.startswith('"') and tag.endswith('"')
    assert '"' not in tag[1:-1]
    assert "," not in tag


@pytest.mark.parametrize(("start", "end"), [(0, 0), (0, 10), (10, 10), (5, 100)])
def test_etag_changes_with_closure(start: int, end: int) -> None:
    assert etag("inc", start, end, False) != etag("inc", start, end, True)


@pytest.mark.parametrize("closed", [False, True])
def test_etag_changes_with_incarnation(closed: bool) -> None:
    assert etag("first", 0, 10, closed) != etag("second", 0, 10, closed)


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize(
    ("range_a", "range_b"),
    [((0, 10), (0, 11)), ((0, 10), (1, 10)), ((0, 0), (10, 10)), ((1, 23), (12, 3))],
)
def test_etag_changes_with_range(
    range_a: tuple[int, int], range_b: tuple[int, int], closed: bool
) -> None:
    assert etag("inc", *range_a, closed) != etag("inc", *range_b, closed)


def test_etags_are_unique_across_all_inputs() -> None:
    combos = list(itertools.product(["a", "b", "a:1"], [0, 1, 11], [0, 1, 11, 111], [False, True]))
    tags = {etag(*combo) for combo in combos}
    assert len(tags) == len(combos)


def test_etag_is_deterministic() -> None:
    assert etag("inc", 3, 7, True) == etag("inc", 3, 7, True)


# ---------------------------------------------------------------- If-None-Match

TAG = etag("inc", 0, 10, False)
OTHER = etag("inc", 0, 11, False)


@pytest.mark.parametrize(
    ("if_none_match", "expected"),
    [
        (None, False),
        ("", False),
        (TAG, True),
        ('"inc:0:10"', True),
        ("inc:0:10", True),  # unquoted, as some clients send it
        (f"  {TAG}  ", True),
        ("*", True),
        (" * ", True),
        (f"{OTHER}, {TAG}", True),
        (f"{TAG},{OTHER}", True),
        (f'"a", "b",   {TAG}', True),
        ('"a", *', True),
        (OTHER, False),
        ('"inc:0:10:c"', False),
        ('"inc:0:1"', False),
        ('"INC:0:10"', False),  # entity tags are case-sensitive
        ('"a", "b"', False),
        ('"inc:0:10', False),
        (",", False),
        ("**", False),
        ('"*"', False),
    ],
)
def test_etag_matches(if_none_match: str | None, expected: bool) -> None:
    assert etag_matches(if_none_match, TAG) is expected


def test_closed_etag_does_not_match_open_etag() -> None:
    open_tag = etag("inc", 0, 10, False)
    closed_tag = etag("inc", 0, 10, True)
    assert not etag_matches(open_tag, closed_tag)
    assert not etag_matches(closed_tag, open_tag)


def test_old_incarnation_etag_does_not_match() -> None:
    assert not etag_matches(etag("old", 0, 10, False), etag("new", 0, 10, False))


@pytest.mark.parametrize("if_none_match", [f"W/{TAG}", f'"a", W/{TAG}'])
def test_weak_etag_matches(if_none_match: str) -> None:
    assert etag_matches(if_none_match, TAG)


# ---------------------------------------------------------------- Cache-Control

RULES = CacheRules("public", 60, 300, 1, 15)
SHARED = "public, max-age=60, stale-while-revalidate=300"
TIMEOUT = "public, max-age=1, stale-while-revalidate=15"
CATCH_UP, LONG_POLL, SSE = ReadMode.CATCH_UP, ReadMode.LONG_POLL, ReadMode.SSE


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        # mid-stream ranges never change
        (ReadShape(CATCH_UP, has_data=True, at_tail=False, closed=False), SHARED),
        (ReadShape(LONG_POLL, has_data=True, at_tail=False, closed=False), SHARED),
        # the end of a closed stream is final
        (ReadShape(CATCH_UP, has_data=True, at_tail=True, closed=True), SHARED),
        (ReadShape(CATCH_UP, has_data=False, at_tail=True, closed=True), SHARED),
        (ReadShape(LONG_POLL, has_data=False, at_tail=True, closed=True), SHARED),
        (ReadShape(LONG_POLL, has_data=True, at_tail=True, closed=True), SHARED),
        # a long-poll reader moves on from Stream-Next-Offset with a new cursor
        (ReadShape(LONG_POLL, has_data=True, at_tail=True, closed=False), SHARED),
        # a 204 is fresh just long enough to reach every collapsed waiter, and served stale
        # to lagging readers while one request refreshes it
        (ReadShape(LONG_POLL, has_data=False, at_tail=True, closed=False), TIMEOUT),
        # read-your-writes: a catch-up reader stops at the open tail
        (ReadShape(CATCH_UP, has_data=True, at_tail=True, closed=False), NO_STORE),
        (ReadShape(CATCH_UP, has_data=False, at_tail=True, closed=False), NO_STORE),
        # the tail as of now, and SSE, are never kept
        (ReadShape(CATCH_UP, False, True, False, from_now=True), NO_STORE),
        (ReadShape(CATCH_UP, False, True, True, from_now=True), NO_STORE),
        (ReadShape(LONG_POLL, True, True, False, from_now=True), NO_STORE),
        (ReadShape(LONG_POLL, False, True, False, from_now=True), NO_STORE),
        (ReadShape(LONG_POLL, True, False, False, from_now=True), NO_STORE),
        (ReadShape(SSE, has_data=False, at_tail=False, closed=False), EVENT_STREAM),
        (ReadShape(SSE, has_data=True, at_tail=True, closed=True), EVENT_STREAM),
    ],
)
def test_cache_control_decision(shape: ReadShape, expected: str) -> None:
    assert read_cache_control(RULES, shape, None) == expected


ALL_SHAPES = [
    ReadShape(mode, has_data, at_tail, closed, from_now)
    for mode, has_data, at_tail, closed, from_now in itertools.product(
        ReadMode, [False, True], [False, True], [False, True], [False, True]
    )
    if at_tail or not closed  # Stream-Closed is only sent at the tail
]


@pytest.mark.parametrize("shape", ALL_SHAPES)
def test_an_open_tail_is_never_cached_for_catch_up(shape: ReadShape) -> None:
    header = read_cache_control(RULES, shape, None)
    if shape.mode is not LONG_POLL and shape.at_tail and not shape.closed:
        assert header in {NO_STORE, EVENT_STREAM}


@pytest.mark.parametrize("shape", ALL_SHAPES)
def test_an_open_tail_without_data_is_cached_at_most_the_timeout_lifetime(
    shape: ReadShape,
) -> None:
    header = read_cache_control(RULES, shape, None)
    if shape.at_tail and not shape.closed and not shape.has_data:
        assert header in {NO_STORE, EVENT_STREAM, TIMEOUT}


@pytest.mark.parametrize("visibility", ["public", "private"])
def test_visibility_is_the_deployments(visibility: str) -> None:
    rules = CacheRules(visibility, 60, 300, 1)
    shape = ReadShape(CATCH_UP, has_data=True, at_tail=False, closed=False)
    assert read_cache_control(rules, shape, None).startswith(f"{visibility}, ")


MID_STREAM = ReadShape(CATCH_UP, has_data=True, at_tail=False, closed=False)


@pytest.mark.parametrize(
    ("max_age", "swr", "seconds_to_expiry", "expected"),
    [
        (60, 300, 100_000, "public, max-age=60, stale-while-revalidate=300"),
        (60, 300, 300, "public, max-age=60, stale-while-revalidate=240"),
        (60, 300, 60, "public, max-age=60, stale-while-revalidate=0"),
        (60, 300, 30, "public, max-age=30, stale-while-revalidate=0"),
        (60, 300, 30.9, "public, max-age=30, stale-while-revalidate=0"),
        (60, 300, 1, "public, max-age=1, stale-while-revalidate=0"),
        (60, 300, 1.5, "public, max-age=1, stale-while-revalidate=0"),
        (60, 0, 30, "public, max-age=30, stale-while-revalidate=0"),
        (60, 300, 0.999, NO_STORE),
        (60, 300, 0.0, NO_STORE),
        (60, 300, -5.0, NO_STORE),
        (60, 300, -100_000.0, NO_STORE),
        (0, 300, 1000, NO_STORE),
    ],
)
def test_cache_control_capped_by_expiry(
    max_age: int, swr: int, seconds_to_expiry: float, expected: str
) -> None:
    rules = CacheRules("public", max_age, swr, 1)
    assert read_cache_control(rules, MID_STREAM, seconds_to_expiry) == expected


TIMED_OUT = ReadShape(LONG_POLL, has_data=False, at_tail=True, closed=False)


def test_a_timeout_is_not_cached_past_expiry() -> None:
    assert read_cache_control(RULES, TIMED_OUT, 0.5) == NO_STORE


@pytest.mark.parametrize(
    ("max_age", "stale", "seconds_to_expiry", "expected"),
    [
        (1, 15, None, "public, max-age=1, stale-while-revalidate=15"),
        (1, 1, None, "public, max-age=1, stale-while-revalidate=1"),
        (1, 0, None, "public, max-age=1, stale-while-revalidate=0"),
        (5, 25, None, "public, max-age=5, stale-while-revalidate=25"),
        (0, 15, None, NO_STORE),
        (1, 15, 10.5, "public, max-age=1, stale-while-revalidate=9"),
        (1, 15, 1.2, "public, max-age=1, stale-while-revalidate=0"),
    ],
)
def test_a_timeout_is_served_stale_for_its_own_allowance(
    max_age: int, stale: int, seconds_to_expiry: float | None, expected: str
) -> None:
    rules = CacheRules("public", 60, 300, max_age, stale)
    assert read_cache_control(rules, TIMED_OUT, seconds_to_expiry) == expected


@pytest.mark.parametrize("shape", [s for s in ALL_SHAPES if s != TIMED_OUT])
def test_only_a_timeout_takes_the_timeout_allowances(shape: ReadShape) -> None:
    """Every other answer is decided as before, whatever a 204 may be kept for."""
    changed = CacheRules("public", 60, 300, 3, 99)
    assert read_cache_control(changed, shape, None) == read_cache_control(RULES, shape, None)


@pytest.mark.parametrize("seconds_to_expiry", [0.5, 1, 10, 59.9, 60, 61, 299, 3600, 10**9])
@pytest.mark.parametrize("shape", ALL_SHAPES)
def test_cached_lifetime_including_stale_never_outlives_the_stream(
    seconds_to_expiry: float, shape: ReadShape
) -> None:
    header = read_cache_control(RULES, shape, seconds_to_expiry)
    if header in {NO_STORE, EVENT_STREAM}:
        return
    fields = dict(part.strip().split("=") for part in header.split(",")[1:])
    assert int(fields["max-age"]) + int(fields["stale-while-revalidate"]) <= seconds_to_expiry


def test_no_store_constant() -> None:
    assert NO_STORE == "no-store"
