"""What both Spark sources read a partition as, decided from the query's schema: text or bytes,
and the type JSON messages are parsed into."""

from __future__ import annotations

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

from durable_streams_aws.pipeline import OptionError
from durable_streams_aws.pipeline._partitions import value_types


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
