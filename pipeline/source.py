"""The `durable_streams` PySpark data source: batch reads of streams over HTTP.

    spark.dataSource.register(DurableStreamsDataSource)
    df = (spark.read.format("durable_streams")
          .option("url", "http://127.0.0.1:4437/v1/stream")
          .option("streams", "orders,payments")          # or .option("stream", "orders")
          .option("startingOffsets", '{"orders": "0000000000000000_0000000000000420"}')
          .load())

Each stream's range is fixed when the query is planned (up to its tail then, or to
`endingOffsets`) and read with bounded reads (`until`), so the partitions read exactly that
range however much is appended meanwhile. One partition per stream.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from core.client import DurableStream, Offset, StreamInfo

from ._plan import OptionError, ReadOptions, StreamSlice, plan_slices
from ._rows import message_type, rows, schema_ddl


@dataclass
class SlicePartition(InputPartition):
    """Everything a partition's read needs travels with it (it runs in another process)."""

    slice: StreamSlice
    as_text: bool


class DurableStreamsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "durable_streams"

    def schema(self) -> str:
        options = ReadOptions.parse(self.options)
        return schema_ddl(list(_content_types(options).values()))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(ReadOptions.parse(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import BatchWriter, SinkOptions

        _check_sink_schema(schema, overwrite)
        return BatchWriter(SinkOptions.parse(self.options).for_stream())

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import SinkOptions, StreamWriter

        _check_sink_schema(schema, overwrite)
        return StreamWriter(SinkOptions.parse(self.options).for_stream())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .streaming import StreamReader

        as_text = schema["message"].dataType.typeName() == "string"
        return StreamReader(ReadOptions.parse(self.options), dict(self.options), as_text)


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        infos = heads(options)
        content_types = {stream: info.content_type for stream, info in infos.items()}
        tails = {stream: info.next_offset.token for stream, info in infos.items()}
        self.slices = plan_slices(options, tails, content_types)
        self.as_text = message_type(list(content_types.values())) == "STRING"

    def partitions(self) -> Sequence[InputPartition]:
        return [SlicePartition(piece, self.as_text) for piece in self.slices]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, SlicePartition)
        return read_slice(partition)


def read_slice(partition: SlicePartition) -> Iterator[tuple]:
    """The rows of one stream's range (on an executor)."""
    piece = partition.slice
    with DurableStream(piece.url) as stream:
        for batch in stream.read(Offset(piece.start), until=Offset(piece.end)):
            yield from rows(piece.stream, piece.content_type, batch, partition.as_text)


def _check_sink_schema(schema: StructType, overwrite: bool) -> None:
    if overwrite:
        raise OptionError("a stream is append-only: use mode 'append', not 'overwrite'")
    if "message" not in schema.fieldNames():
        raise OptionError("the DataFrame needs a 'message' column (string or binary) to append")


def heads(options: ReadOptions) -> dict[str, StreamInfo]:
    """Each stream's metadata (its tail and content type), by HEAD."""
    infos = {}
    for stream in options.streams:
        with DurableStream(options.stream_url(stream)) as handle:
            infos[stream] = handle.head()
    return infos


def _content_types(options: ReadOptions) -> dict[str, str]:
    return {stream: info.content_type for stream, info in heads(options).items()}
