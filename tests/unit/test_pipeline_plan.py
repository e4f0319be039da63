"""The Spark source's pure parts: options, the plan of ranges, and rows from reads."""

from __future__ import annotations

import random

import pytest

from durable_streams_aws.core.protocol.offsets import format_snapshot_offset
from durable_streams_aws.core.storage import ReadBatch
from durable_streams_aws.pipeline import (
    DataLoss,
    OptionError,
    Origin,
    ReadOptions,
    StreamSlice,
    StreamState,
    plan_slices,
)
from durable_streams_aws.pipeline._admission import FIRST, Budget, admitted_end, canonical
from durable_streams_aws.pipeline._plan import (
    MAX_PARTITION_BYTES,
    OPEN_COST_BYTES,
    pack_slices,
    span_bytes,
)
from durable_streams_aws.pipeline._rows import message_type, rows, schema_ddl

URL = "http://h/v1/stream"
JSON = "application/json"


def token(position: int) -> str:
    return f"{0:016d}_{position:016d}"


def test_options_name_the_streams_and_their_offsets() -> None:
    options = ReadOptions.parse(
        {
            "url": URL + "/",
            "stream": "a",
            "streams": "b, a,c/",
            "startingoffsets": f'{{"b": "{token(4)}"}}',
        }
    )
    assert options.origin == Origin(URL) and options.streams == ("a", "b", "c")
    assert options.starting == {"b": token(4)} and options.ending is None
    assert options.origin.stream_url("b") == f"{URL}/b"
    assert options.origin.stream_url("a b/c?d#e%") == f"{URL}/a%20b/c%3Fd%23e%25"
    assert options.fail_on_data_loss and options.prefix is None
    latest = ReadOptions.parse({"url": URL, "stream": "a", "endingoffsets": "latest"})
    assert latest.ending is None and latest.starting == {}


def test_options_can_name_a_prefix_and_the_store_itself() -> None:
    options = ReadOptions.parse(
        {
            "table": "t",
            "bucket": "b",
            "endpoint": "http://127.0.0.1:5000",
            "prefix": "orders/",
            "startingoffsets": f'{{"orders/7": "{token(3)}"}}',  # under the prefix: fine
            "failondataloss": "FALSE",
            "bytesperpartition": "1048576",
            "jsonschema": " id INT ",
        }
    )
    assert options.origin == Origin(None, "t", "b", "http://127.0.0.1:5000")
    assert options.origin.direct and options.prefix == "orders/" and options.streams == ()
    assert not options.fail_on_data_loss and options.partition_bytes == 1048576
    assert options.json_schema == "id INT"
    assert options.with_listed(["orders/2", "orders/1"]).streams == ("orders/1", "orders/2")


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"stream": "a"}, "'url' is required"),
        ({"url": "s3://b", "stream": "a"}, "'url' is required"),
        ({"url": URL, "table": "t", "bucket": "b", "stream": "a"}, "either 'url'"),
        ({"table": "t", "stream": "a"}, "both 'table' and 'bucket'"),
        ({"url": URL}, "'stream', 'streams'"),
        ({"url": URL, "streams": " , "}, "'stream', 'streams'"),
        ({"url": URL, "stream": "a", "startingoffsets": "nope"}, "startingOffsets must be"),
        ({"url": URL, "stream": "a", "startingoffsets": '{"a": "5"}'}, "startingOffsets must"),
        ({"url": URL, "stream": "a", "endingoffsets": '{"a": 1}'}, "endingOffsets must be"),
        ({"url": URL, "stream": "a", "endingoffsets": '{"b": "-1"}'}, "not read: b"),
        ({"url": URL, "stream": "a", "failondataloss": "yes"}, "true or false"),
        ({"url": URL, "stream": "a", "bytesperpartition": "0"}, "positive whole number"),
        ({"url": URL, "stream": "a", "minpartitions": "two"}, "positive whole number"),
    ],
)
def test_options_that_cannot_work_say_why(options: dict[str, str], complaint: str) -> None:
    with pytest.raises(OptionError, match=complaint):
        ReadOptions.parse(options)


def states(**tails: int) -> dict[str, StreamState | None]:
    return {name: StreamState(token(tail), "text/plain") for name, tail in tails.items()}


def test_the_plan_covers_each_non_empty_range() -> None:
    options = ReadOptions.parse(
        {"url": URL, "streams": "a,b,c,d", "startingoffsets": f'{{"c": "{token(3)}"}}'}
    )
    assert plan_slices(options, states(a=5, b=0, c=3, d=9)) == [
        StreamSlice("a", "-1", token(5), "text/plain"),
        StreamSlice("d", "-1", token(9), "text/plain"),
    ]
    ending = ReadOptions.parse(
        {"url": URL, "stream": "a", "endingoffsets": f'{{"a": "{token(2)}"}}'}
    )
    assert plan_slices(ending, states(a=5))[0].end == token(2)
    with pytest.raises(OptionError, match="ends before"):
        plan_slices(ending, states(a=1))


def test_lost_data_fails_the_read_unless_told_to_read_on() -> None:
    named = {"url": URL, "streams": "a,b", "startingoffsets": f'{{"b": "{token(8)}"}}'}
    gone = {**states(b=9), "a": None}
    shorter = states(a=4, b=2)  # b was re-created and is shorter than where the read stands
    for found, lost in ((gone, "'a' does not exist"), (shorter, "'b' ends before")):
        with pytest.raises(DataLoss, match=lost):
            plan_slices(ReadOptions.parse(named), found)
    read_on = ReadOptions.parse({**named, "failondataloss": "false"})
    assert plan_slices(read_on, gone) == [StreamSlice("b", token(8), token(9), "text/plain")]
    assert plan_slices(read_on, shorter) == [
        StreamSlice("a", "-1", token(4), "text/plain"),
        StreamSlice("b", "-1", token(2), "text/plain"),  # the new stream, from its beginning
    ]
    listed = ReadOptions.parse({"url": URL, "prefix": "x/"}).with_listed(["x/1", "x/2"])
    found = {**states(**{"x/1": 3}), "x/2": None}  # deleted since it was listed: not a loss
    assert plan_slices(listed, found, listed=["x/1", "x/2"]) == [
        StreamSlice("x/1", "-1", token(3), "text/plain")
    ]


MB = 1024 * 1024


def sized(*sizes: int) -> list[StreamSlice]:
    return [StreamSlice(f"s{i}", "-1", token(size), JSON) for i, size in enumerate(sizes)]


def test_small_streams_are_packed_into_as_many_partitions_as_asked() -> None:
    eight = sized(*[1_250_000] * 8)  # 8 streams of 1.25 MB, 2 cores: 4 streams a partition
    assert pack_slices(eight, 2) == [tuple(eight[:4]), tuple(eight[4:])]
    assert len(pack_slices(eight, 8)) == 8 and len(pack_slices(eight, 100)) == 8
    assert [len(p) for p in pack_slices(eight, 3)] == [3, 2, 3]
    uneven = sized(80, 100, 100, 100, 100, 100)  # about equal: a few bytes apart
    assert [len(p) for p in pack_slices(uneven, 2)] == [3, 3]
    two = sized(5 * MB, 5 * MB)
    assert pack_slices(two, 2) == [(two[0],), (two[1],)]
    assert pack_slices(two, 1) == [tuple(two)]
    assert pack_slices([], 4) == []


def test_a_partition_holds_at_most_its_bound_unless_one_slice_is_larger() -> None:
    # At most MAX_PARTITION_BYTES however few partitions are asked for.
    many = sized(*[40 * MB] * 6)
    assert [len(p) for p in pack_slices(many, 1)] == [2, 2, 2]
    huge = sized(1000, 300 * MB, 1000, 1000)
    assert pack_slices(huge, 1) == [(huge[0],), (huge[1],), tuple(huge[2:])]
    # bytesPerPartition: about that many bytes a partition, with no cost for opening a slice.
    pieces = sized(MB, MB, 10, 10, 10)
    assert pack_slices(pieces, 1, MB) == [(pieces[0],), (pieces[1],), tuple(pieces[2:])]


@pytest.mark.parametrize("seed", range(300))
def test_packing_keeps_every_slice_once_in_order(seed: int) -> None:
    chance = random.Random(seed)
    sizes = [0, 10, 1000, MB, 9 * MB, 200 * MB]
    slices = sized(*(chance.choice(sizes) for _ in range(chance.randint(0, 30))))
    wanted = chance.randint(1, 12)
    given = chance.choice([None, None, MB, 10 * MB])  # bytesPerPartition
    packed = pack_slices(slices, wanted, given)
    assert [piece for partition in packed for piece in partition] == slices
    assert all(packed)
    opening = OPEN_COST_BYTES if given is None else 0
    costs = [[span_bytes(p) + opening for p in partition] for partition in packed]
    most = given or MAX_PARTITION_BYTES
    assert all(len(c) == 1 or sum(c) <= most for c in costs)
    if given is None:
        share = max(OPEN_COST_BYTES, -(-sum(map(sum, costs)) // wanted))
        if share <= MAX_PARTITION_BYTES and all(c <= share for part in costs for c in part):
            assert len(packed) == min(len(slices), wanted)  # exactly as many as asked for


def test_a_range_starting_with_a_snapshot_is_read_alone() -> None:
    # A snapshot's size is not known before it is read: it may be most of the stream.
    snapshots = [
        StreamSlice(f"c{i}", format_snapshot_offset(100), token(300), JSON) for i in range(6)
    ]
    assert pack_slices(snapshots, 2) == [(piece,) for piece in snapshots]
    assert pack_slices(snapshots, 1, 64 * MB) == [(piece,) for piece in snapshots]
    mixed = [*sized(10, 10), snapshots[0], *sized(10)]
    assert [len(p) for p in pack_slices(mixed, 1)] == [2, 1, 1]


def test_a_snapshot_range_counts_from_its_position() -> None:
    snapshot = StreamSlice("a", format_snapshot_offset(100), token(300), JSON)
    assert span_bytes(snapshot) == 200
    assert span_bytes(StreamSlice("a", token(5), token(5), JSON)) == 0


def json_batch(start: int, messages: list[bytes]) -> ReadBatch:
    return ReadBatch(start, start + sum(map(len, messages)), messages=tuple(messages))


def test_json_rows_carry_each_messages_own_offset() -> None:
    read = json_batch(3, [b'{"a":1}', b"2"])
    assert list(rows("s", "application/json", read, as_text=True)) == [
        ("s", token(10), '{"a":1}', "application/json"),
        ("s", token(11), "2", "application/json"),
    ]
    assert list(rows("s", "application/json", json_batch(0, [b"7"]), as_text=False)) == [
        ("s", token(1), b"7", "application/json")
    ]
    parsed = list(rows("s", "application/json", read, True, parse=lambda raw: len(raw)))
    assert [row[4] for row in parsed] == [7, 1]


def test_a_read_whose_messages_do_not_add_up_is_an_error() -> None:
    with pytest.raises(ValueError, match="messages end at"):
        list(rows("s", "application/json", ReadBatch(0, 9, messages=(b"1",)), as_text=True))


def test_bytes_and_text_are_a_row_per_read() -> None:
    whole = ReadBatch(0, 3, data=b"abc", ends=(3,))
    assert list(rows("s", "text/plain", whole, as_text=True)) == [
        ("s", token(3), "abc", "text/plain")
    ]
    # A read cut inside an append: its row's offset resumes at exactly that byte.
    cut = ReadBatch(0, 2, data=b"ab", ends=())
    assert list(rows("s", "text/plain", cut, as_text=True)) == [
        ("s", token(2) + "_i", "ab", "text/plain")
    ]
    assert list(rows("s", "image/png", ReadBatch(0, 0, data=b""), as_text=False)) == []
    assert message_type(["application/json", "text/csv; charset=utf-8"]) == "STRING"
    assert message_type(["application/json", "application/octet-stream"]) == "BINARY"
    assert schema_ddl(["application/json"], "id INT").endswith(", value STRUCT<id INT>")


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
