"""JSON messages parsed into the Spark type a query asked for (the `jsonSchema` option), the
way Spark's own `from_json` does by default: a value that does not fit its field is null, and
so is a message that is not a JSON object. Pure."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

_INTEGER_BITS = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}
SUPPORTED = (
    "STRING, BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL, ARRAY, "
    "MAP<STRING, ...> and STRUCT"
)


def unsupported(data_type: DataType) -> list[str]:
    """The types in `data_type` that messages cannot be parsed into (empty: all can)."""
    if isinstance(data_type, StructType):
        return [bad for field in data_type.fields for bad in unsupported(field.dataType)]
    if isinstance(data_type, ArrayType):
        return unsupported(data_type.elementType)
    if isinstance(data_type, MapType):
        keys = [] if isinstance(data_type.keyType, StringType) else [data_type.simpleString()]
        return keys + unsupported(data_type.valueType)
    simple = (StringType, BooleanType, FloatType, DoubleType, DecimalType, *_INTEGER_BITS)
    return [] if isinstance(data_type, simple) else [data_type.simpleString()]


def parser(schema: StructType) -> Callable[[bytes], Any]:
    """Parse one message (its JSON bytes) into `schema`'s shape."""

    def parse(raw: bytes) -> Any:
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return conform(value, schema)

    return parse


def conform(value: Any, data_type: DataType) -> Any:
    """`value` (as JSON gives it) in the form Spark takes for `data_type`, or None."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        if not isinstance(value, dict):
            return None
        return tuple(conform(value.get(field.name), field.dataType) for field in data_type.fields)
    if isinstance(data_type, ArrayType):
        if not isinstance(value, list):
            return None
        return [conform(item, data_type.elementType) for item in value]
    if isinstance(data_type, MapType):
        if not isinstance(value, dict):
            return None
        return {key: conform(item, data_type.valueType) for key, item in value.items()}
    if isinstance(data_type, StringType):
        # Like from_json: a field typed STRING holding a number or an object keeps its text.
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if isinstance(data_type, BooleanType):
        return value if isinstance(value, bool) else None
    if isinstance(data_type, (FloatType, DoubleType)):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        try:
            number = float(value)
        except OverflowError:  # an integer with hundreds of digits
            return None
        return number if math.isfinite(number) else None
    if isinstance(data_type, DecimalType):
        return _decimal(value, data_type)
    bits = _INTEGER_BITS.get(type(data_type))
    if bits is not None and isinstance(value, int) and not isinstance(value, bool):
        return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else None
    return None


def _decimal(value: Any, data_type: DecimalType) -> Decimal | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = Decimal(repr(value)).quantize(
            Decimal(1).scaleb(-data_type.scale), rounding=ROUND_HALF_UP
        )
    except InvalidOperation:
        return None
    digits = len(number.as_tuple().digits)
    return number if digits <= data_type.precision else None
