"""The Spark source's pure parts: options, the plan of ranges, and rows from reads."""

from __future__ import annotations

import pytest

from core.client import Batch, Offset
from pipeline import OptionError, ReadOptions, StreamSlice, plan_slices
from pipeline._admission import FIRST, Budget, admitted_end, canonical
from pipeline._rows import message_type, rows

URL = "http://h/v1/stream"


def token(position: int) -> str:
    return f"{0:016d}_{position:016d}"


def test_options_name_the_streams_and_their_offsets() -> None:
    options = ReadOptions.parse(
        {"url": URL + "/", "stream": "a", "streams": "b, a,c/", "startingoffsets": '{"b": "x"}'}
    )
    assert options.url == URL and options.streams == ("a", "b", "c")
    assert options.starting == {"b": "x"} and options.ending is None
    assert options.stream_url("b") == f"{URL}/b"
    latest = ReadOptions.parse({"url": URL, "stream": "a", "endingoffsets": "latest"})
    assert latest.ending is None and latest.starting == {}


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"stream": "a"}, "'url' is required"),
        ({"url": "s3://b", "stream": "a"}, "'url' is required"),
        ({"url": URL}, "'stream' or 'streams'"),
        ({"url": URL, "streams": " , "}, "'stream' or 'streams'"),
        ({"url": URL, "stream": "a", "startingoffsets": "nope"}, "startingOffsets must be"),
        ({"url": URL, "stream": "a", "endingoffsets": '{"a": 1}'}, "endingOffsets must be"),
        ({"url": URL, "stream": "a", "endingoffsets": '{"b": "x"}'}, "not read: b"),
    ],
)
def test_options_that_cannot_work_say_why(options: dict[str, str], complaint: str) -> None:
    with pytest.raises(OptionError, match=complaint):
        ReadOptions.parse(options)


def test_the_plan_covers_each_non_empty_range() -> None:
    options = ReadOptions.parse({"url": URL, "streams": "a,b,c,d", "startingoffsets": '{"c": "t"}'})
    tails = {"a": token(5), "b": token(0), "c": "t", "d": token(9)}
    types = dict.fromkeys(tails, "text/plain")
    assert plan_slices(options, tails, types) == [
        StreamSlice("a", f"{URL}/a", "-1", token(5), "text/plain"),
        StreamSlice("d", f"{URL}/d", "-1", token(9), "text/plain"),
    ]
    ending = ReadOptions.parse(
        {"url": URL, "stream": "a", "endingoffsets": f'{{"a": "{token(2)}"}}'}
    )
    assert plan_slices(ending, {"a": token(5)}, {"a": "x/y"})[0].end == token(2)


def batch(start: str, end: int, data: bytes) -> Batch:
    return Batch(Offset(start), Offset(token(end)), data, None, False, False)


def test_json_rows_carry_each_messages_own_offset() -> None:
    read = batch(token(3), 3 + 8, b'[{"a":1}, 2]')  # messages of 7 and 1 bytes
    assert list(rows("s", "application/json", read, as_text=True)) == [
        ("s", token(10), '{"a":1}', "application/json"),
        ("s", token(11), "2", "application/json"),
    ]
    from_start = batch("-1", 1, b"[7]")
    assert list(rows("s", "application/json", from_start, as_text=False)) == [
        ("s", token(1), b"7", "application/json")
    ]


def test_a_read_whose_messages_do_not_add_up_is_an_error() -> None:
    with pytest.raises(ValueError, match="messages end at"):
        list(rows("s", "application/json", batch(token(0), 9, b"[1,2]"), as_text=True))


def test_bytes_and_text_are_a_row_per_read() -> None:
    assert list(rows("s", "text/plain", batch("-1", 3, b"abc"), as_text=True)) == [
        ("s", token(3), "abc", "text/plain")
    ]
    assert list(rows("s", "image/png", batch("-1", 0, b""), as_text=False)) == []
    assert message_type(["application/json", "text/csv; charset=utf-8"]) == "STRING"
    assert message_type(["application/json", "application/octet-stream"]) == "BINARY"


# ---------------------------------------------------------------- streaming admission


def test_offsets_are_canonical() -> None:
    assert list(canonical({"b": "-1", "a": token(4)}).items()) == [("a", token(4)), ("b", FIRST)]
    assert token(0) == FIRST


@pytest.mark.parametrize(
    ("budget", "streams", "shares"),
    [
        (Budget(rows=10), 3, [Budget(rows=4), Budget(rows=3), Budget(rows=3)]),
        (Budget(rows=2), 3, [Budget(rows=1), Budget(rows=1), Budget(rows=1)]),  # at least one
        (Budget(bytes=100), 2, [Budget(bytes=50), Budget(bytes=50)]),
        (Budget(), 2, [Budget(), Budget()]),
    ],
)
def test_a_budget_is_shared_between_streams(budget: Budget, streams: int, shares: list) -> None:
    assert budget.shares(streams) == shares


PENDING = [(token(10), 10), (token(25), 15), (token(30), 5)]


@pytest.mark.parametrize(
    ("budget", "end"),
    [
        (Budget(), token(30)),
        (Budget(rows=2), token(25)),
        (Budget(bytes=25), token(25)),
        (Budget(bytes=24), token(10)),
        (Budget(bytes=1), token(10)),  # one row even when it alone is over: always move on
        (Budget(rows=5, bytes=12), token(10)),
    ],
)
def test_a_batch_takes_what_the_budget_allows(budget: Budget, end: str) -> None:
    assert admitted_end(token(0), iter(PENDING), budget) == end


def test_nothing_pending_stays_where_it_is() -> None:
    assert admitted_end(token(7), iter([]), Budget(rows=3)) == token(7)
