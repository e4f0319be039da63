"""Long-poll cursors (PROTOCOL.md section 10.1): intervals, jitter, monotonic progression."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from core.protocol.cursor import (
    CURSOR_EPOCH,
    INTERVAL_SECONDS,
    current_interval,
    next_cursor,
)

NOW = CURSOR_EPOCH + 1000 * INTERVAL_SECONDS + 7.5  # inside interval 1000
CURRENT = 1000
MAX_STEP = math.ceil(3600 / INTERVAL_SECONDS)  # jitter of up to 3600 s, in intervals
KEYS = [f"incarnation-{i}:{i * 37}" for i in range(60)]


def test_epoch_is_2024_10_09_utc() -> None:
    assert datetime(2024, 10, 9, tzinfo=UTC).timestamp() == CURSOR_EPOCH
    assert INTERVAL_SECONDS == 20


# ---------------------------------------------------------------- current interval


@pytest.mark.parametrize(
    ("offset_seconds", "interval", "expected"),
    [
        (0, 20, 0),
        (0.001, 20, 0),
        (19.999, 20, 0),
        (20, 20, 1),
        (39.999, 20, 1),
        (40, 20, 2),
        (20_000, 20, 1000),
        (20_007.5, 20, 1000),
        (86_400, 20, 4320),
        (59, 60, 0),
        (60, 60, 1),
        (5, 1, 5),
        (-0.001, 20, -1),
        (-20, 20, -1),
        (-20.001, 20, -2),
    ],
)
def test_current_interval(offset_seconds: float, interval: int, expected: int) -> None:
    assert current_interval(CURSOR_EPOCH + offset_seconds, interval) == expected


def test_current_interval_default_is_twenty_seconds() -> None:
    assert current_interval(CURSOR_EPOCH + 45) == 2


def test_current_interval_never_decreases_with_time() -> None:
    values = [current_interval(CURSOR_EPOCH + t / 4) for t in range(0, 4000)]
    assert values == sorted(values)


# ---------------------------------------------------------------- next cursor


@pytest.mark.parametrize("client_cursor", [None, "0", "1", "999", str(CURRENT - 1), "0999"])
def test_old_or_absent_cursor_gets_the_current_interval(client_cursor: str | None) -> None:
    assert next_cursor(NOW, client_cursor, "k") == str(CURRENT)


@pytest.mark.parametrize(
    "client_cursor",
    [str(CURRENT), str(CURRENT + 1), str(CURRENT + 500), "999999999999999999"],
)
@pytest.mark.parametrize("key", KEYS[:10])
def test_cursor_at_or_past_current_is_strictly_increased(client_cursor: str, key: str) -> None:
    result = int(next_cursor(NOW, client_cursor, key))
    echoed = int(client_cursor)
    assert result > echoed
    assert 1 <= result - echoed <= MAX_STEP


@pytest.mark.parametrize("key", KEYS)
def test_jitter_is_between_one_second_and_an_hour(key: str) -> None:
    for interval in (1, 20, 60, 3600, 7200):
        current = current_interval(NOW, interval)
        step = int(next_cursor(NOW, str(current), key, interval)) - current
        assert 1 <= step <= max(1, math.ceil(3600 / interval))


def test_jitter_varies_between_streams() -> None:
    steps = {int(next_cursor(NOW, str(CURRENT), key)) - CURRENT for key in KEYS}
    assert len(steps) > 1


@pytest.mark.parametrize("client_cursor", [None, "5", str(CURRENT), str(CURRENT + 3), "abc"])
@pytest.mark.parametrize("key", KEYS[:5])
def test_deterministic_for_same_inputs(client_cursor: str | None, key: str) -> None:
    results = {next_cursor(NOW, client_cursor, key) for _ in range(5)}
    assert len(results) == 1


@pytest.mark.parametrize("key", KEYS[:10])
def test_same_result_anywhere_in_the_interval(key: str) -> None:
    start = CURSOR_EPOCH + CURRENT * INTERVAL_SECONDS
    results = {next_cursor(start + dt, str(CURRENT), key) for dt in (0, 0.5, 10, 19.999)}
    assert len(results) == 1


@pytest.mark.parametrize("key", KEYS[:10])
def test_never_backwards_when_echoed(key: str) -> None:
    """A client echoing each cursor, polling at various times, never sees one go backwards."""
    cursor: str | None = None
    previous = -1
    for step in range(300):
        now = CURSOR_EPOCH + 50_000 + step * 7.3
        result = int(next_cursor(now, cursor, key))
        assert result > previous
        assert result >= current_interval(now)
        previous = result
        cursor = str(result)


@pytest.mark.parametrize("key", KEYS[:10])
def test_result_is_never_below_current_interval(key: str) -> None:
    for client_cursor in [None, "0", str(CURRENT - 1), str(CURRENT), str(CURRENT + 10)]:
        assert int(next_cursor(NOW, client_cursor, key)) >= CURRENT


@pytest.mark.parametrize("client_cursor", [None, "3", str(CURRENT), str(CURRENT + 9)])
def test_cursor_is_a_plain_decimal_string(client_cursor: str | None) -> None:
    result = next_cursor(NOW, client_cursor, "k")
    assert result.isascii() and result.isdigit()
    assert result == str(int(result))


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        " ",
        "abc",
        "-1",
        "-1001",
        "+1001",
        "1001.0",
        "1.5",
        "1e3",
        "0x3e9",
        " 1001",
        "1001 ",
        "10 01",
        "1001abc",
        "1" * 19,  # too long to be a cursor
        "9" * 100,
        "null",
        "\x00",
    ],
)
def test_garbage_cursor_is_ignored(garbage: str) -> None:
    assert next_cursor(NOW, garbage, "k") == str(CURRENT)


@pytest.mark.parametrize("garbage", ["\u00b2", "1\u00b2", "\u2460"])
def test_unicode_digit_like_cursor_is_ignored(garbage: str) -> None:
    assert next_cursor(NOW, garbage, "k") == str(CURRENT)


@pytest.mark.parametrize("garbage", ["\u0661\u0660\u0660\u0660", "\uff11\uff10\uff10\uff10"])
def test_non_ascii_decimal_cursor_never_goes_below_current(garbage: str) -> None:
    # Arabic-Indic and full-width digits parse as numbers; whatever they mean, the cursor
    # must still not fall behind the current interval.
    assert int(next_cursor(NOW, garbage, "k")) >= CURRENT
