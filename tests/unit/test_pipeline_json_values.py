"""Parsing JSON messages into the type a query asks for: values that fit come through, the
rest are null (as Spark's from_json does), and types it cannot fill are named up front."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from durable_streams_aws.pipeline._json_values import conform, parser, unsupported

ORDER = StructType(
    [
        StructField("id", LongType()),
        StructField("tags", ArrayType(StringType())),
        StructField("lines", ArrayType(StructType([StructField("qty", IntegerType())]))),
        StructField("attrs", MapType(StringType(), DoubleType())),
        StructField("paid", BooleanType()),
    ]
)


def test_a_message_fills_its_fields_by_name() -> None:
    parse = parser(ORDER)
    raw = b'{"id": 7, "tags": ["a"], "lines": [{"qty": 2}, {}], "attrs": {"w": 1}, "x": 0}'
    assert parse(raw) == (7, ["a"], [(2,), (None,)], {"w": 1.0}, None)
    assert parse(b"[1, 2]") is None  # not an object
    assert parse(b"not json") is None
    assert parse(b'{"id": "7", "paid": 1}') == (None, None, None, None, None)


@pytest.mark.parametrize(
    ("value", "data_type", "expected"),
    [
        (True, BooleanType(), True),
        (1, BooleanType(), None),
        (True, IntegerType(), None),
        (2**31 - 1, IntegerType(), 2**31 - 1),
        (2**31, IntegerType(), None),
        (-129, ByteType(), None),
        (2**63, LongType(), None),
        (1.5, IntegerType(), None),
        (3, DoubleType(), 3.0),
        (10**400, DoubleType(), None),
        (10**400, LongType(), None),
        (1.25, DoubleType(), 1.25),
        ("1.5", DoubleType(), None),
        ({"a": [1]}, StringType(), '{"a":[1]}'),  # a STRING field keeps the value's JSON
        ("é", StringType(), "é"),
        (12.345, DecimalType(5, 2), Decimal("12.35")),
        (12345.6, DecimalType(5, 2), None),  # too many digits
        ("1", DecimalType(5, 2), None),
        (None, LongType(), None),
        ([1, "x"], ArrayType(LongType()), [1, None]),
        ({"k": "v"}, ArrayType(LongType()), None),
    ],
)
def test_each_type_takes_what_fits(value: Any, data_type: DataType, expected: Any) -> None:
    assert conform(value, data_type) == expected


def test_types_messages_cannot_fill_are_named() -> None:
    assert unsupported(ORDER) == []
    odd = StructType(
        [
            StructField("at", TimestampType()),
            StructField("days", ArrayType(DateType())),
            StructField("by_id", MapType(LongType(), StringType())),
        ]
    )
    assert unsupported(odd) == ["timestamp", "date", "map<bigint,string>"]
