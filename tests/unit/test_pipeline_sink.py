"""The sink's handling of what Spark gives a writer: Arrow record batches (Spark 4.1 and later,
`DataSourceArrowWriter`/`DataSourceStreamArrowWriter`) or rows (Spark 4.0's stream writer),
and the check that each message for a JSON stream is one JSON text. Pure."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import Row

from durable_streams_aws.pipeline.sink import ROWS_AT_ONCE, json_values, message_lists


def test_record_batches_give_their_message_column_in_order() -> None:
    batches = [
        pa.RecordBatch.from_pydict({"message": ["a", "b"], "other": [1, 2]}),
        pa.RecordBatch.from_pydict({"message": ["c"], "other": [3]}),
    ]
    assert list(message_lists(batches)) == [["a", "b"], ["c"]]


def test_binary_messages_stay_bytes() -> None:
    batch = pa.RecordBatch.from_pydict({"message": pa.array([b"\x00\xff", b""], pa.binary())})
    assert list(message_lists([batch])) == [[b"\x00\xff", b""]]


def test_rows_are_taken_a_bounded_list_at_a_time() -> None:
    count = 2 * ROWS_AT_ONCE + 3
    rows = (Row(message=f"m{n}") for n in range(count))
    lists = list(message_lists(rows))
    assert [len(one) for one in lists] == [ROWS_AT_ONCE, ROWS_AT_ONCE, 3]
    assert [m for one in lists for m in one] == [f"m{n}" for n in range(count)]


def test_nothing_gives_nothing() -> None:
    assert list(message_lists([])) == []


def test_json_messages_are_parsed_and_a_bad_one_is_named() -> None:
    assert json_values(['{"a": 1}', b"[1, 2]", " 3 "], "u") == [{"a": 1}, [1, 2], 3]
    with pytest.raises(ValueError, match="message 1 of a batch is not a JSON text"):
        json_values(['{"a": 1}', "1, 2"], "u")  # two texts: would be two messages
    with pytest.raises(ValueError, match="message 0 of a batch is not a JSON text"):
        json_values([None], "u")
