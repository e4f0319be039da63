"""ETags and Cache-Control for reads (PROTOCOL.md section 10.1)."""

from __future__ import annotations

import itertools

import pytest

from core.protocol.caching import NO_STORE, etag, etag_matches, read_cache_control

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


@pytest.mark.parametrize(
    ("visibility", "max_age", "swr", "expected"),
    [
        ("public", 60, 300, "public, max-age=60, stale-while-revalidate=300"),
        ("private", 60, 300, "private, max-age=60, stale-while-revalidate=300"),
        ("public", 0, 0, "public, max-age=0, stale-while-revalidate=0"),
        ("public", 3600, 86400, "public, max-age=3600, stale-while-revalidate=86400"),
    ],
)
def test_cache_control_without_expiry(
    visibility: str, max_age: int, swr: int, expected: str
) -> None:
    assert read_cache_control(visibility, max_age, swr, None) == expected


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
    assert read_cache_control("public", max_age, swr, seconds_to_expiry) == expected


@pytest.mark.parametrize("seconds_to_expiry", [0.5, 1, 10, 59.9, 60, 61, 299, 3600, 10**9])
def test_max_age_never_outlives_the_stream(seconds_to_expiry: float) -> None:
    header = read_cache_control("public", 60, 300, seconds_to_expiry)
    if header == NO_STORE:
        return
    fields = dict(part.strip().split("=") for part in header.split(",")[1:])
    assert int(fields["max-age"]) <= seconds_to_expiry
    assert int(fields["stale-while-revalidate"]) <= seconds_to_expiry


@pytest.mark.parametrize("seconds_to_expiry", [61, 100, 299, 359])
def test_cached_lifetime_including_stale_never_outlives_the_stream(
    seconds_to_expiry: float,
) -> None:
    header = read_cache_control("public", 60, 300, seconds_to_expiry)
    fields = dict(part.strip().split("=") for part in header.split(",")[1:])
    assert int(fields["max-age"]) + int(fields["stale-while-revalidate"]) <= seconds_to_expiry


def test_no_store_constant() -> None:
    assert NO_STORE == "no-store"
