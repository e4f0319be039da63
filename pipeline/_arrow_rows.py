"""Arrow record batches from what a read returned: the same columns, types, values and order as
the rows of `_rows.rows` (one row per JSON message or snapshot message, one per read of a byte
or text stream), built column by column. Pure."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from durable_streams_aws.core.protocol.jsonmode import LINES_SEPARATOR, lines_span
from durable_streams_aws.core.protocol.offsets import MAX_POSITION, format_offset
from durable_streams_aws.core.storage import ReadBatch

from ._arrow_json import parse_values
from ._responses import response_messages
from ._rows import SCHEMA_FIELDS, VALUE_FIELD, LinedRead, Read, SnapshotRead

_DIGITS = len(str(MAX_POSITION))
_PREFIX = format_offset(0)[:-_DIGITS]  # the reserved first part, and its separator
_MOST_BINARY = 2**31 - 1  # what an Arrow binary array's 32-bit offsets reach


def row_type(as_text: bool, value_type: StructType | None) -> StructType:
    """The Spark type of the rows read (the source's schema)."""
    fields = [StructField(name, StringType()) for name in SCHEMA_FIELDS]
    fields[SCHEMA_FIELDS.index("message")] = StructField(
        "message", StringType() if as_text else BinaryType()
    )
    if value_type is not None:
        fields.append(StructField(VALUE_FIELD, value_type))
    return StructType(fields)


def arrow_schema(as_text: bool, value_type: StructType | None) -> pa.Schema:
    """The Arrow schema Spark takes batches of rows of that type in."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(row_type(as_text, value_type), timezone="UTC")


def record_batch(
    stream: str,
    content_type: str,
    batch: Read,
    schema: pa.Schema,
    value_type: StructType | None = None,
) -> pa.RecordBatch | None:
    """One batch's rows (None: it has none), in `schema` (from `arrow_schema`)."""
    message = _messages(stream, batch)
    count = len(message)
    if not count:
        return None
    if isinstance(batch, SnapshotRead):
        offsets = pa.repeat(pa.scalar(batch.token, pa.string()), count)
    elif isinstance(batch, ReadBatch) and batch.messages is None:
        offsets = pa.array([format_offset(batch.end, batch.inside)], pa.string())
    else:
        offsets = message_ends(stream, batch, message)
    column = message
    if pa.types.is_string(schema.field("message").type):
        column = message.cast(pa.string())  # checks the text is UTF-8, as decoding did
    columns = [
        pa.repeat(pa.scalar(stream, pa.string()), count),
        offsets,
        column,
        pa.repeat(pa.scalar(content_type, pa.string()), count),
    ]
    if value_type is not None:
        arrow_type = schema.field(VALUE_FIELD).type
        columns.append(parse_values(message, value_type, arrow_type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _messages(stream: str, batch: Read) -> pa.Array:
    """The batch's rows' messages: one per JSON or snapshot message, one per read otherwise."""
    if isinstance(batch, LinedRead):
        return lined_messages(batch.body)
    if isinstance(batch, SnapshotRead):
        return pa.array(batch.messages, pa.binary())
    if batch.messages is None:
        return pa.array([batch.data] if batch.data else [], pa.binary())
    if not batch.messages and batch.start != batch.end:
        raise ValueError(f"{stream}: messages end at {batch.start}, the read at {batch.end}")
    return pa.array(batch.messages, pa.binary())


def lined_messages(body: bytes) -> pa.Array:
    """The messages of a body laid out a message per line (`jsonmode.join_lines`), split by
    Arrow at the separators between lines; where its line breaks are not only those, as
    `response_messages` splits it."""
    inside = _lines_inside(body)
    if inside is not None:
        messages = pc.split_pattern(inside, pattern=LINES_SEPARATOR).values
        if len(messages) + 1 == body.count(b"\n"):
            return messages
    return pa.array(response_messages(body), pa.binary())


def _lines_inside(body: bytes) -> pa.Array | None:
    """`jsonmode.lines_inside`, as a one-value Arrow array over the body's own bytes rather
    than a copy of them (a bulk read's body is tens of megabytes)."""
    span = lines_span(body)
    if span is None or len(body) > _MOST_BINARY:
        return None
    bounds = pa.array(span, pa.int32())
    return pa.Array.from_buffers(pa.binary(), 1, [None, bounds.buffers()[1], pa.py_buffer(body)])


def message_ends(stream: str, batch: ReadBatch | LinedRead, messages: pa.Array) -> pa.Array:
    """Each JSON message's offset: the position where it ends (`format_offset`'s token)."""
    lengths = pc.binary_length(messages).cast(pa.int64())
    ends = pc.add(pc.cumulative_sum(lengths), batch.start)
    last = ends[-1].as_py()
    if last != batch.end:
        raise ValueError(f"{stream}: messages end at {last}, the read at {batch.end}")
    if batch.start < 0 or last > MAX_POSITION:
        raise ValueError(f"position out of range: {last}")
    digits = pc.utf8_lpad(ends.cast(pa.string()), width=_DIGITS, padding="0")
    return pc.binary_join_element_wise(_PREFIX, digits, "")
