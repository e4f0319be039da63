"""The `durable_streams` PySpark data source: batch reads of streams.

    spark.dataSource.register(DurableStreamsDataSource)
    df = (spark.read.format("durable_streams")
          .option("url", "http://127.0.0.1:4437/v1/stream")
          .option("streams", "orders,payments")          # or "stream", or "prefix"
          .option("startingOffsets", '{"orders": "0000000000000000_0000000000000420"}')
          .load())

Streams are read over HTTP (`url`) or straight from the store (`table` and `bucket`, plus
`endpoint` for an emulator). Each stream's range is fixed when the DataFrame is loaded (up to
its tail then, or to `endingOffsets`) and read with bounded reads, so the partitions read
exactly that range however much is appended meanwhile. Small streams are read together, packed
into as few partitions as the machine's cores (or `minPartitions`); reading the store directly,
`bytesPerPartition` splits a stream's range into pieces of about that size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from durable_streams_aws.core.protocol.headers import is_json

from ._access import access
from ._partitions import (
    Resolved,
    SlicePartition,
    read_partition,
    resolve,
    slice_partitions,
    value_types,
)
from ._plan import OptionError, ReadOptions, plan_slices
from ._rows import is_textual, schema_ddl


class DurableStreamsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "durable_streams"

    def schema(self) -> str:
        resolved = resolve(ReadOptions.parse(self.options))
        options, states, _ = resolved
        content_types = [state.content_type for state in states.values() if state is not None]
        if options.json_schema is not None and not all(map(is_json, content_types)):
            raise OptionError("jsonSchema parses JSON streams only; some streams read are not")
        # Spark hands this instance, pickled, to the batch reader's planning: what was found
        # here fixes each stream's range when the DataFrame is loaded, so all its actions read
        # the same rows (as a file source's listing does), without asking every stream again.
        self._resolved: Resolved | None = resolved
        return schema_ddl(content_types, options.json_schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        resolved = getattr(self, "_resolved", None)  # None when the user gave the schema
        return BatchReader(ReadOptions.parse(self.options), schema, resolved)

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
    def __init__(
        self, options: ReadOptions, schema: StructType, resolved: Resolved | None = None
    ) -> None:
        options, states, listed = resolved or resolve(options)
        self.slices = plan_slices(options, states, listed)
        if options.partition_bytes is not None:
            origin = access(options.origin)
            self.slices = [p for s in self.slices for p in origin.split(s, options.partition_bytes)]
        self.options = options
        self.as_text, self.value_type = value_types(schema)
        kinds = {piece.content_type for piece in self.slices}
        # A schema given by the user, or decided from an earlier look at the streams.
        if (self.as_text and not all(map(is_textual, kinds))) or (
            self.value_type is not None and not all(map(is_json, kinds))
        ):
            raise OptionError("the streams changed kind while the query was planned: run it again")

    def partitions(self) -> Sequence[InputPartition]:
        return slice_partitions(self.options, self.slices, self.as_text, self.value_type)

    def read(self, partition: InputPartition) -> Iterator[tuple] | Iterator[pa.RecordBatch]:
        if not isinstance(partition, SlicePartition):
            return iter(())  # nothing to read: Spark reads one empty default partition
        return read_partition(partition)


def _check_sink_schema(schema: StructType, overwrite: bool) -> None:
    if overwrite:
        raise OptionError("a stream is append-only: use mode 'append', not 'overwrite'")
    if "message" not in schema.fieldNames():
        raise OptionError("the DataFrame needs a 'message' column (string or binary) to append")
