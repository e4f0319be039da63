"""Subscription patterns: which patterns are accepted, what they match, and the listing prefix
used to backfill existing streams."""

from __future__ import annotations

import random
import re
import time

import pytest

from durable_streams_aws.core.subscriptions._glob import check_pattern, glob_matches, literal_prefix
from durable_streams_aws.core.subscriptions.errors import SubscriptionError, invalid


@pytest.mark.parametrize(
    "pattern",
    [
        "a",
        "events/*",
        "events/**",
        "**",
        "*",
        "**/x",
        "a/**/b",
        "a/*/b/**/c",
        "sync-*",
        "*-suffix",
        "a*b*c",
        "*a*",
        "tenants/*/sync-*/events",
        "what?/[x]/{y}",  # only '*' is special
        "__ds/x",  # no stream is there, but the pattern is well formed
        "\u65e5\u672c/*",
        "x" * 1024,
        "\u00e9" * 512,  # 2 bytes each: exactly at the limit
        "a/" * 511 + "b",
    ],
)
def test_valid_patterns(pattern: str) -> None:
    assert check_pattern(pattern) is pattern


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("", "non-empty"),
        ("x" * 1025, "1024 bytes"),
        ("\u00e9" * 513, "1024 bytes"),
        ("\u65e5" * 342, "1024 bytes"),  # 342 characters, 1026 bytes
        ("a/\ud800", "valid Unicode"),
        ("/a", "start with '/'"),
        ("/**", "start with '/'"),
        ("a/", "empty segments"),
        ("a//b", "empty segments"),
        ("**/", "empty segments"),
        ("./a", "'.' or '..'"),
        ("a/../b", "'.' or '..'"),
        ("a/.", "'.' or '..'"),
        ("a**", "'**' must be a whole segment"),
        ("**a", "'**' must be a whole segment"),
        ("a/***", "'**' must be a whole segment"),
        ("a/b**c/d", "'**' must be a whole segment"),
        ("a\x00b", "control"),
        ("a\nb", "control"),
        ("a\tb", "control"),
        ("a\x7fb", "control"),
        ("a\x85b", "control"),
    ],
)
def test_invalid_patterns_are_400(pattern: str, why: str) -> None:
    with pytest.raises(SubscriptionError) as refused:
        check_pattern(pattern)
    assert refused.value.status == 400
    assert refused.value.code == "INVALID_REQUEST"
    assert why in refused.value.message


@pytest.mark.parametrize("value", [None, 1, b"a/*", ["a"]])
def test_a_pattern_that_is_not_a_string_is_400(value: object) -> None:
    with pytest.raises(SubscriptionError) as refused:
        check_pattern(value)  # type: ignore[arg-type]
    assert refused.value.code == "INVALID_REQUEST"


def test_a_long_segment_is_quoted_short_in_the_message() -> None:
    with pytest.raises(SubscriptionError) as refused:
        check_pattern("a" * 500 + "**")
    assert len(refused.value.message) < 200


def test_invalid_builds_the_error_body() -> None:
    error = invalid("nope")
    assert (error.status, error.code, error.message) == (400, "INVALID_REQUEST", "nope")
    assert error.body() == {"error": {"code": "INVALID_REQUEST", "message": "nope"}}
    assert str(error) == "400 INVALID_REQUEST: nope"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        # literal
        ("a", "a", True),
        ("a", "b", False),
        ("a", "a/b", False),
        ("a/b", "a/b", True),
        ("a/b", "a/bc", False),
        ("a/b", "a", False),
        # `*`: exactly one segment
        ("*", "a", True),
        ("*", "a/b", False),
        ("events/*", "events/abc", True),
        ("events/*", "events", False),
        ("events/*", "events/a/b", False),
        ("events/*", "other/abc", False),
        ("*/b", "a/b", True),
        ("*/b", "b", False),
        ("*/*", "a/b", True),
        ("*/*", "a/b/c", False),
        # `**`: zero or more segments
        ("**", "a", True),
        ("**", "a/b/c/d", True),
        ("events/**", "events", True),
        ("events/**", "events/a", True),
        ("events/**", "events/a/b/c", True),
        ("events/**", "eventsx/a", False),
        ("events/**", "other/events/a", False),
        ("**/x", "x", True),
        ("**/x", "a/x", True),
        ("**/x", "a/b/c/x", True),
        ("**/x", "x/a", False),
        ("**/x", "ax", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/b", True),
        ("a/**/b", "a/x/y/z/b", True),
        ("a/**/b", "a/x/y/z/c", False),
        ("a/**/b", "a/b/c", False),
        ("a/**/b/**/c", "a/b/c", True),
        ("a/**/b/**/c", "a/1/b/2/3/c", True),
        ("a/**/b/**/c", "a/1/c/2/b", False),
        ("**/a/**", "a", True),
        ("**/a/**", "x/y/a/z", True),
        ("**/a/**", "x/y/b/z", False),
        ("**/*", "a", True),
        ("*/**", "a", True),
        ("*/**/*", "a", False),
        ("*/**/*", "a/b", True),
        ("**/**", "a/b", True),
        # `*` within a segment
        ("sync-*", "sync-123", True),
        ("sync-*", "sync-", True),  # any run, including none
        ("sync-*", "sync", False),
        ("sync-*", "xsync-1", False),
        ("sync-*", "sync-1/2", False),  # never across a '/'
        ("*-log", "app-log", True),
        ("*-log", "app-logs", False),
        ("a*b", "ab", True),
        ("a*b", "axxb", True),
        ("a*b", "a", False),
        ("a*b", "b", False),
        ("a*a", "a", False),  # prefix and suffix must not overlap
        ("a*a", "aa", True),
        ("*a*", "bab", True),
        ("*a*", "bbb", False),
        ("a*b*c", "abc", True),
        ("a*b*c", "a-b-c", True),
        ("a*b*c", "acb", False),
        ("a*b*c", "a-c-b-c", True),
        ("*ab*ab*", "abab", True),
        ("*ab*ab*", "aba", False),
        ("tenants/*/sync-*/events", "tenants/t1/sync-9/events", True),
        ("tenants/*/sync-*/events", "tenants/t1/async-9/events", False),
        # no other character is special
        ("what?", "what?", True),
        ("what?", "whatx", False),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("a.b", "axb", False),
        ("\u65e5\u672c/*", "\u65e5\u672c/\u00e9", True),
    ],
)
def test_matching(pattern: str, path: str, matches: bool) -> None:
    check_pattern(pattern)
    assert glob_matches(pattern, path) is matches


def _reference_matches(pattern: str, path: str) -> bool:
    """The rules, written as directly as possible: backtracking over segments, a regular
    expression within each."""

    def segment(glob: str, name: str) -> bool:
        return re.fullmatch("[^/]*".join(map(re.escape, glob.split("*"))), name) is not None

    def match(globs: list[str], names: list[str]) -> bool:
        if not globs:
            return not names
        if globs[0] == "**":
            return match(globs[1:], names) or (bool(names) and match(globs, names[1:]))
        return bool(names) and segment(globs[0], names[0]) and match(globs[1:], names[1:])

    return match(pattern.split("/"), path.split("/"))


_GLOB_SEGMENTS = ["a", "b", "ab", "*", "**", "**", "a*", "*b", "a*b", "*a*", "b*a"]
_PATH_SEGMENTS = ["a", "b", "ab", "ba", "aab", "abba", "c"]


def _random_pattern(rng: random.Random) -> str:
    return "/".join(rng.choice(_GLOB_SEGMENTS) for _ in range(rng.randint(1, 6)))


def _random_path(rng: random.Random) -> str:
    return "/".join(rng.choice(_PATH_SEGMENTS) for _ in range(rng.randint(1, 7)))


def test_matching_agrees_with_a_backtracking_reference() -> None:
    rng = random.Random(20260509)
    seen = {True: 0, False: 0}
    for _ in range(20000):
        pattern, path = _random_pattern(rng), _random_path(rng)
        check_pattern(pattern)
        expected = _reference_matches(pattern, path)
        assert glob_matches(pattern, path) is expected, (pattern, path)
        seen[expected] += 1
    assert min(seen.values()) > 1000  # the comparison exercised both answers


def test_double_star_equivalences() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        pattern, path = _random_pattern(rng), _random_path(rng)
        matched = glob_matches(pattern, path)
        # `**` matches anything, repeated `**`s are one, and a literal head changes nothing.
        assert glob_matches("**", path)
        assert glob_matches(pattern.replace("**", "**/**"), path) is matched
        assert glob_matches("x/y/" + pattern, "x/y/" + path) is matched
        if matched:
            # Surrounding `**`s match any further segments, or none.
            assert glob_matches("**/" + pattern, path)
            assert glob_matches("**/" + pattern, "x/y/" + path)
            assert glob_matches(pattern + "/**", path)
            assert glob_matches(pattern + "/**", path + "/tail/more")
            assert glob_matches("**/" + pattern + "/**", "x/" + path + "/tail")
        # `**` matches whatever `*` does, and more.
        widened = "/".join("**" if part == "*" else part for part in pattern.split("/"))
        assert glob_matches(widened, path) or not matched


def test_star_never_crosses_a_slash() -> None:
    rng = random.Random(11)
    for _ in range(2000):
        path = _random_path(rng)
        assert glob_matches("*", path) is ("/" not in path)
        assert glob_matches("*a*", path) is ("/" not in path and "a" in path)


def test_many_double_stars_match_fast() -> None:
    path = "/".join(["a"] * 60)
    interleaved = "/".join(["**/a"] * 30) + "/b"  # exponential for backtracking
    adjacent = "/".join(["**"] * 30) + "/b"
    segment = "*a" * 30 + "*b"
    check_pattern(interleaved)
    check_pattern(adjacent)
    check_pattern(segment)
    started = time.perf_counter()
    assert not glob_matches(interleaved, path)
    assert glob_matches(interleaved[: -len("/b")], path)
    assert not glob_matches(adjacent, path)
    assert glob_matches(adjacent, path + "/b")
    assert not glob_matches(segment, "a" * 1000)
    assert glob_matches(segment, "a" * 1000 + "b")
    assert time.perf_counter() - started < 0.5


def test_the_longest_patterns_and_paths_match_fast() -> None:
    pattern = "/".join(["**", "*"] * 170)  # 849 bytes, 340 segments
    check_pattern(pattern)
    path = "/".join(["a"] * 512)
    started = time.perf_counter()
    assert glob_matches(pattern, path) is True
    assert glob_matches(pattern, "/".join(["a"] * 169)) is False
    assert time.perf_counter() - started < 2


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [
        ("events/*", "events/"),
        ("**", ""),
        ("*", ""),
        ("*/x", ""),
        ("sync-*", ""),
        ("a/b*", "a/"),
        ("a/b/*/c", "a/b/"),
        ("a/**/c", "a/"),
        ("a/**/*", "a/"),
        ("a/*/**", "a/"),
        # `**` may match no segment at all, so these match the bare literal part too.
        ("a/**", "a"),
        ("a/b/**/**", "a/b"),
        # A fully literal pattern matches exactly itself.
        ("a/b", "a/b"),
        ("a", "a"),
    ],
)
def test_literal_prefix(pattern: str, prefix: str) -> None:
    assert literal_prefix(pattern) == prefix


def test_every_match_starts_with_the_literal_prefix() -> None:
    rng = random.Random(3)
    literal_heads = ["", "a/", "a/b/", "ab/"]
    checked = 0
    for _ in range(20000):
        pattern = rng.choice(literal_heads) + _random_pattern(rng)
        path = _random_path(rng)
        if glob_matches(pattern, path):
            assert path.startswith(literal_prefix(pattern)), (pattern, path)
            checked += 1
    assert checked > 500
