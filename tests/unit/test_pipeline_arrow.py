"""The Arrow read path gives exactly the rows of the Python one: JSON parsed natively by Arrow
equals JSON parsed message by message (`conform`), for messages that fit the schema and many
that do not (those batches take the Python way), and the record batches of a read carry the
same columns, types, values and order as its rows."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from pyspark.sql.conversion import LocalDataToArrowConversion  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
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
    StructField,
    StructType,
)

from durable_streams_aws.core.protocol.jsonmode import join_lines  # noqa: E402
from durable_streams_aws.core.storage import ReadBatch  # noqa: E402
from durable_streams_aws.pipeline import _arrow_json  # noqa: E402
from durable_streams_aws.pipeline._arrow_json import arrow_parsable, parse_in_python  # noqa: E402
from durable_streams_aws.pipeline._arrow_rows import (  # noqa: E402
    arrow_schema,
    lined_messages,
    record_batch,
    row_type,
)
from durable_streams_aws.pipeline._json_values import parser  # noqa: E402
from durable_streams_aws.pipeline._responses import response_messages  # noqa: E402
from durable_streams_aws.pipeline._rows import LinedRead, Read, SnapshotRead, rows  # noqa: E402


def parse_values(messages: list[bytes], value_type: StructType, arrow: pa.StructType) -> pa.Array:
    return _arrow_json.parse_values(pa.array(messages, pa.binary()), value_type, arrow)


def parse_natively(
    messages: list[bytes], value_type: StructType, arrow: pa.StructType
) -> pa.Array | None:
    return _arrow_json.parse_natively(pa.array(messages, pa.binary()), value_type, arrow)


INNER = StructType([StructField("x", LongType()), StructField("s", StringType())])
NATIVE = StructType(
    [
        StructField("id", LongType()),
        StructField("n", IntegerType()),
        StructField("small", ByteType()),
        StructField("mid", ShortType()),
        StructField("price", DoubleType()),
        StructField("name", StringType()),
        StructField("ok", BooleanType()),
        StructField("tags", ArrayType(StringType())),
        StructField("grid", ArrayType(ArrayType(IntegerType()))),
        StructField("inner", INNER),
        StructField("lines", ArrayType(INNER)),
    ]
)
PYTHON_ONLY = StructType(
    [
        StructField("id", LongType()),
        StructField("f", FloatType()),
        StructField("d", DecimalType(6, 2)),
        StructField("m", MapType(StringType(), LongType())),
    ]
)
TEXTS = ["", "plain", "é", "line\nbreak", 'quote " and \\', "\u0000nul", "😀 emoji", "\r\t"]


def fitting(data_type: DataType, rng: random.Random, depth: int = 0) -> Any:
    """A JSON value that fits `data_type` (or null, below the message's top)."""
    if depth and rng.random() < 0.1:
        return None
    if isinstance(data_type, StructType):
        return {
            f.name: fitting(f.dataType, rng, depth + 1)
            for f in data_type.fields
            if rng.random() < 0.9
        }
    if isinstance(data_type, ArrayType):
        return [fitting(data_type.elementType, rng, depth + 1) for _ in range(rng.randrange(4))]
    if isinstance(data_type, StringType):
        return rng.choice(TEXTS) + str(rng.randrange(1000))
    if isinstance(data_type, BooleanType):
        return rng.random() < 0.5
    if isinstance(data_type, (DoubleType, FloatType)):
        return rng.choice([rng.uniform(-1e6, 1e6), rng.randrange(-(2**60), 2**60), 0.0, 1e300])
    if isinstance(data_type, DecimalType):
        return round(rng.uniform(-9999, 9999), 3)
    if isinstance(data_type, MapType):
        return {str(k): rng.randrange(100) for k in range(rng.randrange(3))}
    bits = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}[type(data_type)]
    return rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))


MISFITS: list[Any] = [
    1.5,
    1.0,
    2**31,
    2**63,
    -(2**63) - 1,
    10**400,
    "7",
    True,
    {"k": 1},
    [1, "x"],
    -0.0,
    "text",
]


def misfitting(data_type: DataType, rng: random.Random) -> Any:
    """A JSON value that fits `data_type` for some fields only."""
    value = fitting(data_type, rng)
    if isinstance(value, dict) and data_type.fields:  # type: ignore[attr-defined]
        field = rng.choice(data_type.fields)  # type: ignore[attr-defined]
        value[field.name] = rng.choice(MISFITS)
    return value


RAW_MISFITS = [
    b"null",
    b"[1, 2]",
    b"5",
    b'"text"',
    b"not json",
    b'{"id": 1, "id": 2}',
    b'{"price": NaN}',
    b'{"price": Infinity}',
    b'{"price": -0}',
    b'{"price": 1e999}',
    b'{"price": 1' + b"0" * 400 + b"}",
    b'{"id": 1} {"id": 2}',
    b'  {"id": 3}',
    b'{"name": "a\tb"}',
    b'{"id": 1E2}',
    b'{"inner": {"x": 1.5}}',
    b'{"inner": []}',
    b'{"lines": [{"s": 5}]}',
    b'{"lines": [null, {"x": "1"}]}',
    b'{"grid": [[1, 2.5]]}',
    b'{"tags": "x"}',
    b'{"tags": [1]}',
    b'{"ok": 1}',
    b'{"name": "a\\nb \\u00e9 \\ud83d\\ude00"}',
    b'{"name": "x"}\n',
]


def encoded(value: Any, rng: random.Random) -> bytes:
    indent = rng.choice([None, None, 2])  # pretty-printed messages hold raw newlines
    return json.dumps(value, indent=indent, ensure_ascii=rng.random() < 0.5).encode()


def normalized(value: Any) -> Any:
    """Comparable values: floats by their exact text (-0.0 is not 0.0)."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalized(v) for v in value]
    return value


def arrow_type(value_type: StructType) -> pa.StructType:
    return arrow_schema(True, value_type).field("value").type


def python_values(messages: list[bytes], value_type: StructType) -> pa.Array:
    parse = parser(value_type)
    convert = LocalDataToArrowConversion._create_converter(value_type)
    return pa.array([convert(parse(m)) for m in messages], type=arrow_type(value_type))


def same(got: pa.Array, expected: pa.Array) -> None:
    assert got.type == expected.type
    assert normalized(got.to_pylist()) == normalized(expected.to_pylist())


@pytest.mark.parametrize("seed", range(6))
def test_arrow_parses_json_exactly_as_the_python_path(seed: int) -> None:
    rng = random.Random(seed)
    native = 0
    for _ in range(40):
        messages = [encoded(fitting(NATIVE, rng), rng) for _ in range(rng.randrange(1, 60))]
        if rng.random() < 0.5:  # a batch with a message that does not fit
            at = rng.randrange(len(messages))
            if rng.random() < 0.5:
                messages[at] = rng.choice(RAW_MISFITS)
            else:
                messages[at] = encoded(misfitting(NATIVE, rng), rng)
        parsed = parse_values(messages, NATIVE, arrow_type(NATIVE))
        same(parsed, python_values(messages, NATIVE))
        native += parse_natively(messages, NATIVE, arrow_type(NATIVE)) is not None
    assert native >= 10  # the batches that fit (about half) took Arrow's way


@pytest.mark.parametrize("raw", RAW_MISFITS)
def test_each_odd_message_reads_as_in_python(raw: bytes) -> None:
    messages = [b'{"id": 1, "price": 2.5}', raw, b'{"name": "x"}']
    same(parse_values(messages, NATIVE, arrow_type(NATIVE)), python_values(messages, NATIVE))


@pytest.mark.parametrize("value", MISFITS)
def test_each_misfit_in_each_field_reads_as_in_python(value: Any) -> None:
    for field in NATIVE.fields:
        messages = [json.dumps({field.name: value}).encode(), b'{"id": 1}']
        parsed = parse_values(messages, NATIVE, arrow_type(NATIVE))
        same(parsed, python_values(messages, NATIVE))


def test_a_lone_surrogate_fails_the_read_either_way() -> None:
    messages = [b'{"id": 1}', b'{"name": "\\ud800"}']
    assert parse_natively(messages, NATIVE, arrow_type(NATIVE)) is None
    with pytest.raises(UnicodeEncodeError):
        python_values(messages, NATIVE)  # as Spark fails converting the rows today
    with pytest.raises(UnicodeEncodeError):
        parse_values(messages, NATIVE, arrow_type(NATIVE))


def test_exact_doubles_and_big_integers_read_as_in_python() -> None:
    values = [2**53 + 1, 2**64 + 1, 10**300, 0.1, 1e-320, 5e-324, 1.7976931348623157e308]
    messages = [json.dumps({"price": v}).encode() for v in values] + [b'{"price": 1E5}']
    parsed = parse_natively(messages, NATIVE, arrow_type(NATIVE))
    assert parsed is not None
    same(parsed, python_values(messages, NATIVE))


def test_float_decimal_and_map_fields_take_the_python_way() -> None:
    assert arrow_parsable(NATIVE) and not arrow_parsable(PYTHON_ONLY)
    rng = random.Random(7)
    messages = [encoded(fitting(PYTHON_ONLY, rng), rng) for _ in range(50)]
    assert parse_natively(messages, PYTHON_ONLY, arrow_type(PYTHON_ONLY)) is None
    same(
        parse_values(messages, PYTHON_ONLY, arrow_type(PYTHON_ONLY)),
        python_values(messages, PYTHON_ONLY),
    )
    assert parse_in_python([], PYTHON_ONLY, arrow_type(PYTHON_ONLY)).to_pylist() == []


def spark_rows(found: list[tuple], as_text: bool, value_type: StructType | None) -> pa.Table:
    """Rows as Spark converts the tuples a source's read returns."""
    kind = row_type(as_text, value_type)
    converters = [LocalDataToArrowConversion._create_converter(f.dataType) for f in kind.fields]
    columns = [[convert(row[i]) for row in found] for i, convert in enumerate(converters)]
    return pa.Table.from_batches(
        [pa.RecordBatch.from_arrays(columns, schema=arrow_schema(as_text, value_type))]
    )


@pytest.mark.parametrize(
    ("as_text", "value_type"), [(False, None), (True, None), (True, NATIVE), (True, PYTHON_ONLY)]
)
def test_record_batches_hold_the_rows(as_text: bool, value_type: StructType | None) -> None:
    rng = random.Random(3)
    messages = tuple(encoded(fitting(NATIVE, rng), rng) for _ in range(30))
    start = 10**12
    end = start + sum(map(len, messages))
    reads: list[Read] = [
        ReadBatch(start, end, messages=messages),
        LinedRead(start, end, join_lines(list(messages))),  # split by Arrow
        ReadBatch(5, 5, messages=()),
        SnapshotRead("0000000000000000_0000000000000420_s", messages[:3]),
    ]
    parse = parser(value_type) if value_type is not None else None
    schema = arrow_schema(as_text, value_type)
    for read in reads:
        found = list(rows("s", "application/json", read, as_text, parse))
        built = record_batch("s", "application/json", read, schema, value_type)
        if not found:
            assert built is None
            continue
        assert built is not None and built.schema.equals(schema)
        expected = spark_rows(found, as_text, value_type)
        assert normalized(built.to_pylist()) == normalized(expected.to_pylist())


@pytest.mark.parametrize("seed", range(30))
def test_arrow_splits_a_body_laid_out_a_message_per_line_as_the_server_made_it(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [b"{", b"}", b"[", b"]", b",", b'"', b"\\", b" ", b"x", "é".encode(), b"\r"]
    messages = [
        b'"' + b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12))) + b'"'
        for _ in range(rng.randrange(1, 40))
    ]
    body = join_lines(messages)
    assert lined_messages(body).to_pylist() == response_messages(body) == messages
    # A message holding a line break keeps the usual layout; a body that only begins like
    # the line layout is split as any other.
    broken = b'[\n{"a":\n 1},\n2\n]'
    assert lined_messages(broken).to_pylist() == response_messages(broken) == [b'{"a":\n 1}', b"2"]


@pytest.mark.parametrize("body", [b"[\n\n]", b"[\n]", b"[]", b"[\n1\n]", b" [\n1\n]", b"[\n1\n] "])
def test_a_short_or_almost_lined_body_splits_as_the_server_would(body: bytes) -> None:
    assert lined_messages(body).to_pylist() == response_messages(body)


def test_a_byte_stream_read_is_one_row_and_names_a_cut_inside_an_append() -> None:
    schema = arrow_schema(False, None)
    read = ReadBatch(0, 4, data=b"\x00\xff\x01\x02", ends=(8,))
    built = record_batch("b", "application/octet-stream", read, schema)
    assert built is not None
    assert built.to_pylist() == [
        {
            "stream": "b",
            "offset": "0000000000000000_0000000000000004_i",
            "message": b"\x00\xff\x01\x02",
            "content_type": "application/octet-stream",
        }
    ]
    assert record_batch("b", "text/plain", ReadBatch(4, 4), schema) is None


def test_messages_that_do_not_end_where_the_read_does_fail() -> None:
    read = ReadBatch(0, 5, messages=(b"{}",))
    with pytest.raises(ValueError, match="messages end at 2"):
        record_batch("s", "application/json", read, arrow_schema(True, None))
    with pytest.raises(ValueError, match="messages end at 0"):
        record_batch(
            "s", "application/json", ReadBatch(0, 3, messages=()), arrow_schema(True, None)
        )


def test_numbers_arrow_reads_otherwise_never_come_from_arrow() -> None:
    for raw in (b"1" + b"0" * 400, b"NaN", b"-Infinity", b"-0", b"-0.0"):
        messages = [b'{"price": ' + raw + b"}"]
        assert parse_natively(messages, NATIVE, arrow_type(NATIVE)) is None
        same(parse_values(messages, NATIVE, arrow_type(NATIVE)), python_values(messages, NATIVE))


def test_messages_with_line_breaks_of_their_own_are_still_parsed_natively() -> None:
    messages = [b'{\r\n  "id": 1,\n  "name": "x"\r}', b'{"id": 2}', b'{"name":\r"y"}']
    assert parse_natively(messages, NATIVE, arrow_type(NATIVE)) is not None
    same(parse_values(messages, NATIVE, arrow_type(NATIVE)), python_values(messages, NATIVE))
