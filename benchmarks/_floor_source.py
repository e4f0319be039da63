"""A Python data source that reads nothing: the floor of any read through Spark's Python data
source API on this machine, measured beside the file source and `durable_streams`.

Its rows are the `durable_streams` source's on the benchmark's streams (stream, offset, message,
content_type: the same columns, the same messages, the streams packed into as many partitions
as the machine has cores, as that source packs streams of equal size), built once per worker
process and kept, so that after a first run a read costs only what Spark spends planning it,
running its Python tasks and taking their Arrow batches."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import cache
from itertools import accumulate, pairwise
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.pipeline._rows import SCHEMA_FIELDS, schema_ddl

JSON = "application/json"

SCHEMA = schema_ddl([JSON])  # the durable_streams source's, reading JSON streams


class StreamRows(InputPartition):
    """Streams `first` up to `last` (indexes) of `names`, holding `rows` between them all."""

    def __init__(self, names: list[str], first: int, last: int, rows: int) -> None:
        self.names, self.first, self.last, self.rows = names, first, last, rows


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
        parts = min(count, os.cpu_count() or 1)
        bounds = [count * k // parts for k in range(parts + 1)]
        return [StreamRows(self.streams, a, b, self.rows) for a, b in pairwise(bounds)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StreamRows)
        count = len(partition.names)
        for index in range(partition.first, partition.last):
            yield _built(partition.names[index], index, count, partition.rows)


@cache
def _built(stream: str, index: int, streams: int, rows: int) -> pa.RecordBatch:
    messages = [json.dumps(message(n)).encode() for n in range(index, rows, streams)]
    ends = [format_offset(at) for at in accumulate(map(len, messages))]
    count = len(messages)
    columns = [
        pa.repeat(pa.scalar(stream, pa.string()), count),
        pa.array(ends, pa.string()),
        pa.array(messages, pa.binary()).cast(pa.string()),
        pa.repeat(pa.scalar(JSON, pa.string()), count),
    ]
    return pa.RecordBatch.from_arrays(columns, names=list(SCHEMA_FIELDS))
