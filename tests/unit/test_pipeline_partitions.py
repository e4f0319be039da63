"""What both Spark sources read a partition as, decided from the query's schema: text or bytes,
and the type JSON messages are parsed into."""

from __future__ import annotations

import threading

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

from durable_streams_aws.pipeline import OptionError, StreamState
from durable_streams_aws.pipeline._partitions import STATE_LOOKUPS, states_of, value_types


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
