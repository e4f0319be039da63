"""Cursors: strictly increasing for each reader, shared by every reader of the same data."""

from __future__ import annotations

import random

import pytest

from durable_streams_aws.core.protocol.cursor import (
    CURSOR_EPOCH,
    POSITION_WEIGHT,
    next_cursor,
    parse_cursor,
)

NOW = CURSOR_EPOCH + 50_000_000.5
LONG_POLL_TIMEOUT = 15


def anchor(now: float, position: int) -> int:
    return position * POSITION_WEIGHT + int(now - CURSOR_EPOCH)


@pytest.mark.parametrize("position", [0, 1, 17, 10**9, 10**13])
def test_without_an_echo_the_cursor_is_the_anchor(position: int) -> None:
    assert next_cursor(NOW, None, position) == str(anchor(NOW, position))


@pytest.mark.parametrize("echoed", ["", "abc", "-5", "1.5", "١٢", "1" * 41, " 12", "+3"])
def test_cursors_not_of_ours_are_ignored(echoed: str) -> None:
    assert parse_cursor(echoed) is None
    assert next_cursor(NOW, echoed, 10) == str(anchor(NOW, 10))


@pytest.mark.parametrize("position", [0, 5, 10**6])
@pytest.mark.parametrize("offset_from_anchor", [0, 1, 2, 10**6])
def test_an_echo_at_or_ahead_of_the_anchor_is_exceeded_by_one(
    position: int, offset_from_anchor: int
) -> None:
    echoed = anchor(NOW, position) + offset_from_anchor
    assert next_cursor(NOW, str(echoed), position) == str(echoed + 1)


def test_an_echo_behind_the_anchor_gives_the_anchor() -> None:
    assert next_cursor(NOW, "7", 3) == str(anchor(NOW, 3))


def test_cursors_are_exact_in_javascript_for_any_realistic_stream() -> None:
    ninety_terabytes = 90 * 10**12
    cursor = next_cursor(NOW, None, ninety_terabytes)
    assert cursor.isdigit() and int(cursor) < 2**53


@pytest.mark.parametrize("echoed", [2**53 - 1, 2**53, 2**60, 10**39])
def test_even_huge_echoes_are_exceeded(echoed: int) -> None:
    assert int(next_cursor(NOW, str(echoed), 5)) == echoed + 1


def test_a_huge_position_still_moves_the_cursor_forward() -> None:
    first = next_cursor(NOW, None, 10**17)
    assert int(next_cursor(NOW, first, 10**17)) == int(first) + 1


def test_the_protocol_collision_rule_holds_on_any_history() -> None:
    """Whatever the reader's history, its next cursor is strictly greater than its echo."""
    rng = random.Random(7)
    for _ in range(2000):
        now = NOW + rng.uniform(-1e6, 1e6)
        position = rng.randrange(0, 10**12)
        echoed = rng.choice([None, anchor(now, position) + rng.randrange(-5, 5)])
        got = int(next_cursor(now, None if echoed is None else str(echoed), position))
        if echoed is not None and echoed >= 0:
            assert got > echoed


def _follow(readers: dict[str, str | None], now: float, position: int) -> dict[str, str | None]:
    return {name: next_cursor(now, cursor, position) for name, cursor in readers.items()}


def test_a_late_joiner_converges_with_the_followers_on_the_next_append() -> None:
    """Followers who hold cursors from earlier appends and a reader who has none get the same
    cursor for the same data: one cache key for all of them."""
    followers: dict[str, str | None] = {"a": None, "b": None}
    position, now = 100, NOW
    for _ in range(50):  # fast appends, many a second
        position += 37
        now += 0.05
        followers = _follow(followers, now, position)
    readers = {**followers, "late": None}
    readers = _follow(readers, now + 0.01, position + 20)
    assert len(set(readers.values())) == 1


def test_readers_served_seconds_apart_converge_on_the_next_append() -> None:
    position = 1000
    a = next_cursor(NOW, None, position)
    b = next_cursor(NOW + 7, None, position)  # the same data, answered 7 s later
    assert a != b
    position += 1  # the smallest possible append
    assert next_cursor(NOW + 8, a, position) == next_cursor(NOW + 8, b, position)


def test_idle_long_polls_keep_moving_the_cursor_forward() -> None:
    """On an idle stream every 204 gives a new cursor (a new cache key) and the cursor does
    not run away from the clock: a newcomer converges after one timeout."""
    position, now = 500, NOW
    old: str | None = None
    for _ in range(1000):
        now += LONG_POLL_TIMEOUT
        new = next_cursor(now, old, position)
        assert old is None or int(new) > int(old)
        old = new
    newcomer = next_cursor(now, None, position)
    assert old == newcomer


def test_a_follower_never_meets_its_own_cursor_again_at_one_position() -> None:
    """The cache-loop guard: repeated answers at one position, within one second."""
    seen = set()
    cursor = None
    for _ in range(100):
        cursor = next_cursor(NOW, cursor, 42)
        assert cursor not in seen
        seen.add(cursor)
