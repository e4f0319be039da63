"""The `durable_streams` PySpark data source: batch reads of streams.

    spark.dataSource.register(DurableStreamsDataSource)
    df = (spark.read.format("durable_streams")
          .option("url", "http://127.0.0.1:4437/v1/stream")
          .option("streams", "orders,payments")          # or "stream", or "prefix"
          .option("startingOffsets", '{"orders": "0000000000000000_0000000000000420"}')
          .load())

Streams are read over HTTP (`url`) or straight from the store (`table` and `bucket`, plus
`endpoint` for an emulator). Each stream's range is fixed when the query is planned (up to
its tail then, or to `endingOffsets`) and read with bounded reads, so the partitions read
exactly that range however much is appended meanwhile: one partition per stream, or per
offset range of about `bytesPerPartition` bytes when reading the store directly.
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

from durable_streams_aws.client import StreamGone, StreamNotFound
from durable_streams_aws.core.protocol.headers import is_json

from ._access import access
from ._json_values import SUPPORTED, parser, unsupported
from ._plan import (
    DataLoss,
    OptionError,
    Origin,
    ReadOptions,
    StreamSlice,
    StreamState,
    plan_slices,
)
from ._rows import VALUE_FIELD, is_textual, rows, schema_ddl


@dataclass
class SlicePartition(InputPartition):
    """Everything a partition's read needs travels with it (it runs in another process)."""

    origin: Origin
    slice: StreamSlice
    as_text: bool
    value_type: StructType | None  # parse JSON messages into this (`jsonSchema`)
    fail_on_data_loss: bool = True


class DurableStreamsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "durable_streams"

    def schema(self) -> str:
        options, states, _ = resolve(ReadOptions.parse(self.options))
        content_types = [state.content_type for state in states.values() if state is not None]
        if options.json_schema is not None and not all(map(is_json, content_types)):
            raise OptionError("jsonSchema parses JSON streams only; some streams read are not")
        return schema_ddl(content_types, options.json_schema)

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

        return StreamReader(ReadOptions.parse(self.options), dict(self.options), schema)


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        options, states, listed = resolve(options)
        self.slices = plan_slices(options, states, listed)
        if options.partition_bytes is not None:
            origin = access(options.origin)
            self.slices = [p for s in self.slices for p in origin.split(s, options.partition_bytes)]
        self.options = options
        self.as_text, self.value_type = value_types(schema)
        kinds = {piece.content_type for piece in self.slices}
        # The schema was decided from an earlier look at the streams (Spark asks for it first).
        if (self.as_text and not all(map(is_textual, kinds))) or (
            self.value_type is not None and not all(map(is_json, kinds))
        ):
            raise OptionError("the streams changed kind while the query was planned: run it again")

    def partitions(self) -> Sequence[InputPartition]:
        return [
            SlicePartition(
                self.options.origin,
                piece,
                self.as_text,
                self.value_type,
                self.options.fail_on_data_loss,
            )
            for piece in self.slices
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        if not isinstance(partition, SlicePartition):
            return iter(())  # nothing to read: Spark reads one empty default partition
        return read_slice(partition)


def resolve(options: ReadOptions) -> tuple[ReadOptions, dict[str, StreamState | None], list[str]]:
    """The options with the streams under the prefix added, what each stream is now (None:
    not there), and the streams that were only listed."""
    origin = access(options.origin)
    listed = origin.list(options.prefix) if options.prefix is not None else []
    only_listed = [stream for stream in listed if stream not in options.streams]
    options = options.with_listed(listed)
    states = {stream: origin.state(stream) for stream in options.streams}
    return options, states, only_listed


def value_types(schema: StructType) -> tuple[bool, StructType | None]:
    """Whether messages are read as text, and the type of parsed messages (if asked for)."""
    as_text = schema["message"].dataType.typeName() == "string"
    if VALUE_FIELD not in schema.fieldNames():
        return as_text, None
    value_type = schema[VALUE_FIELD].dataType
    assert isinstance(value_type, StructType)
    bad = unsupported(value_type)
    if bad:
        raise OptionError(f"jsonSchema cannot parse into {', '.join(bad)}; it takes {SUPPORTED}")
    return as_text, value_type


def read_slice(partition: SlicePartition) -> Iterator[tuple]:
    """The rows of one stream's range (on an executor)."""
    piece = partition.slice
    parse = parser(partition.value_type) if partition.value_type is not None else None
    try:
        for batch in access(partition.origin).read(piece):
            yield from rows(piece.stream, piece.content_type, batch, partition.as_text, parse)
    except (StreamNotFound, StreamGone) as exc:
        if partition.fail_on_data_loss:
            raise DataLoss(f"{exc}; set failOnDataLoss=false to read on without it") from exc


def _check_sink_schema(schema: StructType, overwrite: bool) -> None:
    if overwrite:
        raise OptionError("a stream is append-only: use mode 'append', not 'overwrite'")
    if "message" not in schema.fieldNames():
        raise OptionError("the DataFrame needs a 'message' column (string or binary) to append")
