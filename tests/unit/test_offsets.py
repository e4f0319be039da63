"""Offset tokens (PROTOCOL.md section 8): format, parse, order, sentinels and rejection."""

from __future__ import annotations

import random

import pytest

from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.offsets import (
    BEGINNING,
    MAX_POSITION,
    NOW,
    Position,
    ReadStart,
    StartKind,
    format_offset,
    parse_offset,
    parse_position,
    parse_read_start,
)

ZERO = "0" * 16
POSITIONS = [0, 1, 9, 10, 99, 100, 255, 256, 1023, 1024, 65535, 10**9, 2**53 - 1, MAX_POSITION]


def _token(second: str, first: str = ZERO) -> str:
    return f"{first}_{second}"


# ---------------------------------------------------------------- format / parse


@pytest.mark.parametrize(
    ("position", "token"),
    [
        (0, "0000000000000000_0000000000000000"),
        (1, "0000000000000000_0000000000000001"),
        (42, "0000000000000000_0000000000000042"),
        (1234567890, "0000000000000000_0000001234567890"),
        (MAX_POSITION, "0000000000000000_9999999999999999"),
    ],
)
def test_format_offset_exact_tokens(position: int, token: str) -> None:
    assert format_offset(position) == token


@pytest.mark.parametrize("position", POSITIONS)
def test_format_parse_round_trip(position: int) -> None:
    token = format_offset(position)
    assert parse_position(token) == position
    assert format_offset(parse_position(token)) == token


@pytest.mark.parametrize("position", POSITIONS)
def test_tokens_are_fixed_width_and_url_safe(position: int) -> None:
    token = format_offset(position)
    assert len(token) == 33
    assert token.startswith(ZERO + "_")
    assert not set(token) & set(",&=?/ ")
    assert token not in {BEGINNING, NOW}


@pytest.mark.parametrize("position", [-1, -100, MAX_POSITION + 1, 10**20])
def test_format_offset_rejects_out_of_range(position: int) -> None:
    with pytest.raises(ValueError):
        format_offset(position)


def test_max_position_is_sixteen_nines() -> None:
    assert MAX_POSITION == 10**16 - 1


# ---------------------------------------------------------------- ordering


@pytest.mark.parametrize(
    ("a", "b"),
    [(0, 1), (1, 2), (9, 10), (99, 100), (199, 1000), (2**32, 2**32 + 1), (0, MAX_POSITION)],
)
def test_lexicographic_order_equals_numeric_order(a: int, b: int) -> None:
    assert format_offset(a) < format_offset(b)
    assert format_offset(a).encode() < format_offset(b).encode()


def test_sorting_tokens_sorts_positions() -> None:
    rng = random.Random(1234)
    positions = sorted({rng.randrange(0, MAX_POSITION + 1) for _ in range(500)} | set(POSITIONS))
    tokens = [format_offset(p) for p in positions]
    shuffled = tokens[:]
    rng.shuffle(shuffled)
    assert sorted(shuffled) == tokens
    assert [parse_position(t) for t in sorted(shuffled)] == positions


def test_distinct_positions_give_distinct_tokens() -> None:
    tokens = {format_offset(p) for p in range(2000)}
    assert len(tokens) == 2000


# ---------------------------------------------------------------- malformed tokens


MALFORMED = [
    pytest.param("", id="empty"),
    pytest.param(" ", id="space"),
    pytest.param(" " + format_offset(5), id="leading-space"),
    pytest.param(format_offset(5) + " ", id="trailing-space"),
    pytest.param("0000000000000000 0000000000000005", id="space-separator"),
    pytest.param("0000000000000000_00000000 0000005", id="inner-space"),
    pytest.param(format_offset(5) + "," + format_offset(6), id="comma-list"),
    pytest.param("0000000000000000,0000000000000005", id="comma-separator"),
    pytest.param("../x", id="dotdot"),
    pytest.param("../" + format_offset(5), id="dotdot-prefix"),
    pytest.param("0000000000000000_000000000000000\x00", id="null-byte-inside"),
    pytest.param(format_offset(5) + "\x00", id="null-byte-after"),
    pytest.param("\n" + format_offset(5), id="leading-newline"),
    pytest.param("0000000000000000_00000000\n0000005", id="inner-newline"),
    pytest.param("0000000000000000_000000000000005", id="second-part-15"),
    pytest.param("0000000000000000_00000000000000005", id="second-part-17"),
    pytest.param("000000000000000_0000000000000005", id="first-part-15"),
    pytest.param("00000000000000000_0000000000000005", id="first-part-17"),
    pytest.param("0000000000000001_0000000000000005", id="non-zero-first-part"),
    pytest.param("9999999999999999_0000000000000000", id="non-zero-first-part-high"),
    pytest.param("0000000000000000-0000000000000005", id="dash-separator"),
    pytest.param("0000000000000000__0000000000000005", id="double-underscore"),
    pytest.param("00000000000000000000000000000005", id="no-separator"),
    pytest.param("0000000000000000_", id="missing-second-part"),
    pytest.param("_0000000000000005", id="missing-first-part"),
    pytest.param("0000000000000000_000000000000000a", id="hex-digit"),
    pytest.param("0000000000000000_-000000000000005", id="negative"),
    pytest.param("0000000000000000_+000000000000005", id="plus-sign"),
    pytest.param("0000000000000000_00000000000000.5", id="decimal-point"),
    pytest.param("-1", id="sentinel-beginning"),
    pytest.param("now", id="sentinel-now"),
    pytest.param("NOW", id="upper-now"),
    pytest.param("5", id="bare-number"),
    pytest.param("0", id="bare-zero"),
    pytest.param("0000000000000000_0000000000000005&x=1", id="query-injection"),
    pytest.param("0000000000000000_0000000000000005/", id="trailing-slash"),
]


@pytest.mark.parametrize("token", MALFORMED)
def test_parse_position_rejects_malformed(token: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_position(token)
    assert info.value.status == 400


@pytest.mark.parametrize("token", [p for p in MALFORMED if p.values[0] not in {BEGINNING, NOW}])
def test_parse_read_start_rejects_malformed(token: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_read_start([token])
    assert info.value.status == 400


def test_parse_position_rejects_trailing_newline() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_position(format_offset(5) + "\n")
    assert info.value.status == 400


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("0000000000000000_000000000000000\u0665", id="arabic-indic-five"),
        pytest.param("0000000000000000_" + "\uff10" * 15 + "5", id="full-width-zeros"),
    ],
)
def test_parse_position_rejects_non_ascii_digits(token: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_position(token)
    assert info.value.status == 400


# ---------------------------------------------------------------- read start


def test_absent_offset_means_beginning() -> None:
    assert parse_read_start([]) == ReadStart(StartKind.BEGINNING)


def test_minus_one_means_beginning() -> None:
    start = parse_read_start(["-1"])
    assert start.kind is StartKind.BEGINNING
    assert start.position == 0


def test_now_means_tail() -> None:
    start = parse_read_start(["now"])
    assert start.kind is StartKind.NOW


@pytest.mark.parametrize("position", POSITIONS)
def test_token_means_that_position(position: int) -> None:
    """A plain token reads from the append holding its position; one cut inside an append
    reads from exactly its position."""
    start = parse_read_start([format_offset(position)])
    assert start == ReadStart(StartKind.POSITION, position, whole=True)
    exact = parse_read_start([format_offset(position, inside=True)])
    assert exact == ReadStart(StartKind.POSITION, position, whole=False)


@pytest.mark.parametrize("position", POSITIONS)
def test_a_token_cut_inside_an_append_sorts_between_its_neighbours(position: int) -> None:
    inside = format_offset(position, inside=True)
    assert parse_offset(inside) == Position(position, exact=True)
    assert parse_position(inside) == position
    assert format_offset(position) < inside
    if position < MAX_POSITION:
        assert inside < format_offset(position + 1)
    assert not set(",&=?/") & set(inside)


@pytest.mark.parametrize(
    "token",
    [
        format_offset(5) + "_",
        format_offset(5) + "_j",
        format_offset(5) + "_ii",
        format_offset(5) + "i",
        format_offset(5, inside=True) + "\n",
    ],
)
def test_only_the_inside_suffix_is_accepted(token: str) -> None:
    with pytest.raises(ProtocolError):
        parse_offset(token)


@pytest.mark.parametrize(
    "values",
    [
        ["-1", "-1"],
        ["now", "now"],
        ["-1", "now"],
        [format_offset(1), format_offset(1)],
        [format_offset(1), format_offset(2)],
        ["-1", format_offset(0)],
        ["", ""],
        ["-1", "now", format_offset(3)],
    ],
)
def test_multiple_offset_values_rejected(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_read_start(values)
    assert info.value.status == 400


@pytest.mark.parametrize(
    ("start", "tail", "expected"),
    [
        (ReadStart(StartKind.BEGINNING), 0, 0),
        (ReadStart(StartKind.BEGINNING), 500, 0),
        (ReadStart(StartKind.NOW), 0, 0),
        (ReadStart(StartKind.NOW), 500, 500),
        (ReadStart(StartKind.POSITION, 7), 500, 7),
        (ReadStart(StartKind.POSITION, 500), 500, 500),
        (ReadStart(StartKind.POSITION, 0), 500, 0),
    ],
)
def test_resolve(start: ReadStart, tail: int, expected: int) -> None:
    assert start.resolve(tail) == expected
