"""The `until` read extension's pure parts: parsing the bound, and cutting a batch at it."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.offsets import ReadStart, StartKind, parse_read_end
from durable_streams_aws.core.storage import ReadBatch


def token(position: int) -> str:
    return f"{0:016d}_{position:016d}"


AT_5 = ReadStart(StartKind.POSITION, 5)


def test_absent_means_unbounded() -> None:
    assert parse_read_end([], AT_5, None) is None
    assert parse_read_end([], ReadStart(StartKind.NOW), "long-poll") is None


@pytest.mark.parametrize("start", [AT_5, ReadStart(StartKind.BEGINNING)])
def test_a_bound_at_or_after_the_start(start: ReadStart) -> None:
    assert parse_read_end([token(5)], start, None) == 5
    assert parse_read_end([token(90)], start, None) == 90


@pytest.mark.parametrize(
    ("values", "start", "live"),
    [
        ([token(9), token(9)], AT_5, None),  # repeated
        (["abc"], AT_5, None),  # malformed
        (["-1"], AT_5, None),  # a sentinel is no bound
        (["now"], AT_5, None),
        ([token(4)], AT_5, None),  # before the offset
        ([token(9)], AT_5, "long-poll"),  # live reads have no end
        ([token(9)], AT_5, "sse"),
        ([token(9)], ReadStart(StartKind.NOW), None),
    ],
)
def test_bounds_that_make_no_sense_are_refused(
    values: list[str], start: ReadStart, live: str | None
) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_read_end(values, start, live)
    assert refused.value.status == 400


def test_bytes_are_cut_exactly() -> None:
    batch = ReadBatch(10, 16, data=b"abcdef")
    assert batch.before(16) is batch and batch.before(99) is batch
    assert batch.before(13) == ReadBatch(10, 13, data=b"abc")
    assert batch.before(10) == ReadBatch(10, 10, data=b"")


def test_json_keeps_only_whole_messages_before_the_bound() -> None:
    batch = ReadBatch(0, 9, messages=(b"1", b'"ab"', b"[2]", b"3"))  # ends at 1, 5, 8, 9
    assert batch.before(9) is batch
    assert batch.before(8).messages == (b"1", b'"ab"', b"[2]") and batch.before(8).end == 8
    assert batch.before(7).messages == (b"1", b'"ab"') and batch.before(7).end == 5
    assert batch.before(0) == ReadBatch(0, 0, messages=())
