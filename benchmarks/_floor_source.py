"""A Python data source that reads nothing: the floor of any read through Spark's Python data
source API on this machine, measured beside the file source and `durable_streams`.

Its rows are the `durable_streams` source's on the benchmark's streams (stream, offset, message,
content_type: the same columns, the same messages, one partition per stream), built once per
worker process and kept, so that after a first run a read costs only what Spark spends
planning it, running its Python tasks and taking their Arrow batches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

SCHEMA = "stream STRING, offset STRING, message STRING, content_type STRING"


class StreamRows(InputPartition):
    def __init__(self, stream: str, index: int, streams: int, rows: int) -> None:
        self.stream, self.index, self.streams, self.rows = stream, index, streams, rows


def message(n: int) -> dict[str, Any]:
    """The benchmark's message n: about 100 bytes of JSON."""
    return {"n": n, "kind": "click", "page": f"/products/{n % 997:04d}", "pad": "x" * 40}


class FloorSource(DataSource):
    """Options: `streams` (comma-separated names) and `rows` (all streams together); message
    n goes to stream n % len(streams), as the benchmark writes them."""

    @classmethod
    def name(cls) -> str:
        return "pipeline_floor"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        streams = self.options["streams"].split(",")
        return FloorReader(streams, int(self.options["rows"]))


class FloorReader(DataSourceReader):
    def __init__(self, streams: list[str], rows: int) -> None:
        self.streams, self.rows = streams, rows

    def partitions(self) -> list[InputPartition]:
        count = len(self.streams)
        return [StreamRows(s, i, count, self.rows) for i, s in enumerate(self.streams)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StreamRows)
        yield _built(partition.stream, partition.index, partition.streams, partition.rows)


@cache
def _built(stream: str, index: int, streams: int, rows: int) -> pa.RecordBatch:
    messages = [json.dumps(message(n)).encode() for n in range(index, rows, streams)]
    ends, at = [], 0
    for raw in messages:
        at += len(raw)
        ends.append(f"{0:016d}_{at:016d}")
    count = len(messages)
    columns = [
        pa.repeat(pa.scalar(stream, pa.string()), count),
        pa.array(ends, pa.string()),
        pa.array(messages, pa.binary()).cast(pa.string()),
        pa.repeat(pa.scalar("application/json", pa.string()), count),
    ]
    return pa.RecordBatch.from_arrays(
        columns, names=["stream", "offset", "message", "content_type"]
    )
