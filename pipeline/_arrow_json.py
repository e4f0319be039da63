"""JSON messages parsed natively by Arrow into the Spark type a query asked for (`jsonSchema`),
with exactly the values `_json_values.conform` gives: where Arrow's reading could differ from
it, the batch's messages are parsed one by one in Python instead. Pure.

Arrow's reader is strict where `conform` answers null: a value of another JSON type than its
field's (a number for a STRING or BOOLEAN field, an object for an ARRAY...), a fraction or an
out-of-range number for an integer field, a duplicated key, a message that is not valid JSON
or not an object all fail the whole parse, and the batch goes the Python way. What it would
accept differently is checked for: a message that does not start with `{` (`null` would be a
row of null fields, not a null row), a row count other than the messages' (one message
holding several texts), a number too big or not a number for a DOUBLE field (Arrow reads
`1e999`-like integers as infinity and `NaN` as NaN, `conform` gives null). FLOAT, DECIMAL and
MAP fields always go the Python way (their rounding and key handling are `conform`'s).

Messages are joined by newlines and read as one block; a JSON text's own raw line breaks can
only be whitespace (the server keeps only valid JSON texts as messages), which Arrow reads as
such within a block.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from ._json_values import parser

_NATIVE = (StringType, BooleanType, ByteType, ShortType, IntegerType, LongType, DoubleType)


def arrow_parsable(data_type: DataType) -> bool:
    """Whether Arrow's JSON reader fills `data_type` as `conform` does (when it succeeds)."""
    if isinstance(data_type, StructType):
        return all(arrow_parsable(field.dataType) for field in data_type.fields)
    if isinstance(data_type, ArrayType):
        return arrow_parsable(data_type.elementType)
    return isinstance(data_type, _NATIVE)


def parse_values(raw: pa.Array, value_type: StructType, arrow_type: pa.StructType) -> pa.Array:
    """The messages (a binary array) parsed into `value_type` (whose Arrow type Spark takes is
    `arrow_type`)."""
    parsed = parse_natively(raw, value_type, arrow_type)
    if parsed is not None:
        return parsed
    return parse_in_python(raw.to_pylist(), value_type, arrow_type)


def parse_natively(
    raw: pa.Array, value_type: StructType, arrow_type: pa.StructType
) -> pa.Array | None:
    """Arrow's parse of the messages, or None where it could differ from `conform`'s."""
    if not len(raw) or not arrow_parsable(value_type):
        return None
    if not pc.all(pc.starts_with(raw, pattern="{")).as_py():
        return None
    whole = pa.ListArray.from_arrays(pa.array([0, len(raw)], pa.int32()), raw)
    # One block: Arrow reads a text's own line breaks (whitespace of a pretty-printed message)
    # as whitespace, so the rows are the messages unless it refuses or counts otherwise.
    table = _read_lines(pc.binary_join(whole, b"\n")[0].as_buffer(), arrow_type)
    if table is None or table.num_rows != len(raw):
        return None
    fields = [table.column(field.name).combine_chunks() for field in arrow_type]
    values = pa.StructArray.from_arrays(fields, fields=list(arrow_type))
    return values if _plain_numbers(values) else None


def _read_lines(data: pa.Buffer, arrow_type: pa.StructType) -> pa.Table | None:
    """A JSON text per line read by Arrow into `arrow_type`'s fields (None: it refused)."""
    options = pa_json.ParseOptions(
        explicit_schema=pa.schema(list(arrow_type)), unexpected_field_behavior="ignore"
    )
    try:
        return pa_json.read_json(
            pa.BufferReader(data),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=data.size + 1),
            parse_options=options,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _plain_numbers(values: pa.Array) -> bool:
    """Whether every (non-null) floating-point number in `values` is finite and no zero is
    negative (`-0` is the integer 0 to `json`, and so the DOUBLE 0.0: Arrow reads -0.0)."""
    if pa.types.is_struct(values.type):
        return all(_plain_numbers(child) for child in values.flatten())
    if pa.types.is_list(values.type):
        return _plain_numbers(values.flatten())
    if pa.types.is_floating(values.type):
        if pc.all(pc.is_finite(values)).as_py() is False:
            return False
        zeros = values.filter(pc.equal(values, 0.0)).to_pylist()
        return all(math.copysign(1.0, zero) > 0 for zero in zeros)
    return True


def parse_in_python(
    messages: Sequence[bytes], value_type: StructType, arrow_type: pa.StructType
) -> pa.Array:
    """Each message parsed by `json` and `conform`, then converted as Spark converts rows."""
    from pyspark.sql.conversion import LocalDataToArrowConversion

    parse = parser(value_type)
    convert = LocalDataToArrowConversion._create_converter(value_type)
    assert convert is not None
    return pa.array([convert(parse(message)) for message in messages], type=arrow_type)
