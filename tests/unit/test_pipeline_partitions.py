"""What both Spark sources read a partition as, decided from the query's schema: text or bytes,
and the type JSON messages are parsed into."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import (
    BinaryType,
    DateType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from durable_streams_aws.client import StreamNotFound
from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.core.storage import ReadBatch
from durable_streams_aws.pipeline import OptionError, StreamState
from durable_streams_aws.pipeline import _partitions as partitions
from durable_streams_aws.pipeline._partitions import (
    STATE_LOOKUPS,
    SlicePartition,
    read_slice_batches,
    states_of,
    value_types,
)
from durable_streams_aws.pipeline._plan import DataLoss, Origin, StreamSlice

BYTES = "application/octet-stream"


def schema(message: StringType | BinaryType, value: StructType | None = None) -> StructType:
    fields = [
        StructField("stream", StringType()),
        StructField("offset", StringType()),
        StructField("message", message),
        StructField("content_type", StringType()),
    ]
    if value is not None:
        fields.append(StructField("value", value))
    return StructType(fields)


def test_messages_are_text_or_bytes_as_the_schema_says() -> None:
    assert value_types(schema(StringType())) == (True, None)
    assert value_types(schema(BinaryType())) == (False, None)


def test_a_json_schema_gives_the_type_messages_are_parsed_into() -> None:
    order = StructType([StructField("id", LongType())])
    assert value_types(schema(StringType(), order)) == (True, order)


def test_a_type_messages_cannot_be_parsed_into_is_refused_up_front() -> None:
    dated = StructType([StructField("day", DateType())])
    with pytest.raises(OptionError, match="jsonSchema cannot parse into"):
        value_types(schema(StringType(), dated))


class Waiting:
    """An origin whose every state lookup waits for `together` lookups to be under way."""

    def __init__(self, together: int) -> None:
        self.barrier = threading.Barrier(together, timeout=5)
        self.asked: list[str] = []

    def state(self, stream: str) -> StreamState | None:
        self.asked.append(stream)
        self.barrier.wait()  # breaks (an error) unless the lookups run at once
        return None if stream == "gone" else StreamState(f"tail of {stream}", "text/plain")


def test_planning_asks_the_streams_states_at_once() -> None:
    streams = [f"s{i}" for i in range(STATE_LOOKUPS)]
    found = states_of(Waiting(STATE_LOOKUPS), [*streams[:-1], "gone"])  # type: ignore[arg-type]
    assert list(found) == [*streams[:-1], "gone"] and found["gone"] is None
    assert found["s3"] == StreamState("tail of s3", "text/plain")
    more = Waiting(STATE_LOOKUPS)  # more streams than at once: in rounds of STATE_LOOKUPS
    many = [f"m{i}" for i in range(3 * STATE_LOOKUPS)]
    assert list(states_of(more, many)) == many  # type: ignore[arg-type]
    assert sorted(more.asked) == sorted(many)


class TwoReadsEach:
    """An origin whose streams are each read in two batches of one byte-stream append; the
    second read of a stream signals that it was asked for. Stream "lost" is gone."""

    def __init__(self) -> None:
        self.second_asked = threading.Event()

    def read(self, piece: StreamSlice) -> Iterator[ReadBatch]:
        if piece.stream == "lost":
            raise StreamNotFound(f"stream {piece.stream!r} was deleted while being read")
        yield ReadBatch(0, 1, data=b"a", ends=(1,))
        self.second_asked.set()
        yield ReadBatch(1, 2, data=b"b", ends=(2,))


def partition_of(*streams: str) -> SlicePartition:
    pieces = tuple(StreamSlice(stream, "-1", format_offset(2), BYTES) for stream in streams)
    return SlicePartition(Origin(url="http://unused.invalid"), pieces, False, None)


def test_a_partition_makes_its_next_read_while_the_caller_holds_a_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    origin = TwoReadsEach()
    monkeypatch.setattr(partitions, "access", lambda _: origin)
    batches = read_slice_batches(partition_of("a"))
    first = next(batches)
    assert first.column("message").to_pylist() == [b"a"]
    # Read in turn, the second read would wait for the caller to ask for another batch.
    assert origin.second_asked.wait(10)
    assert [batch.column("message").to_pylist() for batch in batches] == [[b"b"]]


def test_a_stream_lost_under_a_read_ahead_fails_the_partition_where_it_comes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(partitions, "access", lambda _: TwoReadsEach())
    taken = []
    with pytest.raises(DataLoss, match="failOnDataLoss=false"):
        for batch in read_slice_batches(partition_of("a", "lost", "b")):
            taken += batch.column("message").to_pylist()
    assert taken == [b"a", b"b"]  # all of the first stream, and nothing after the loss
