"""Partition reading shared by the batch source (`source`) and the micro-batch source
(`streaming`): what a query reads is resolved on the driver, and a `SlicePartition` carries
everything an executor needs to read one stream's range into rows. Both sources hand Spark the
same partitions and read them with the same `read_partition` (Arrow record batches in a Spark
task), so a batch read and a micro-batch of the same range return the same rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from durable_streams_aws.client import OffsetGone, StreamGone, StreamNotFound
from durable_streams_aws.core.storage import ReadBatch

from ._access import Access, access
from ._arrow_rows import arrow_schema, record_batch
from ._fetch_ahead import fetched_ahead
from ._json_values import SUPPORTED, parser, unsupported
from ._plan import (
    DataLoss,
    OptionError,
    Origin,
    ReadOptions,
    StreamSlice,
    StreamState,
    after_gone,
    log,
    pack_slices,
)
from ._rows import VALUE_FIELD, Read, SnapshotRead, rows


@dataclass
class SlicePartition(InputPartition):
    """Everything a partition's read needs travels with it (it runs in another process): the
    ranges it reads one after another, small streams packed together (`pack_slices`)."""

    origin: Origin
    slices: tuple[StreamSlice, ...]
    as_text: bool
    value_type: StructType | None  # parse JSON messages into this (`jsonSchema`)
    fail_on_data_loss: bool = True


def slice_partitions(
    options: ReadOptions,
    slices: Sequence[StreamSlice],
    as_text: bool,
    value_type: StructType | None,
) -> list[SlicePartition]:
    """The partitions that read these ranges, packed (`pack_slices`) into about
    `minPartitions` (by default, the cores of the machine planning the read: Spark's own
    parallelism in local mode), or into about `bytesPerPartition` each where that is given."""
    wanted = options.min_partitions or os.cpu_count() or 1
    return [
        SlicePartition(options.origin, packed, as_text, value_type, options.fail_on_data_loss)
        for packed in pack_slices(slices, wanted, options.partition_bytes)
    ]


# The options with the streams under the prefix added, each stream's state, the ones only listed.
Resolved = tuple[ReadOptions, dict[str, StreamState | None], list[str]]


def resolve(options: ReadOptions) -> Resolved:
    """The options with the streams under the prefix added, what each stream is now (None:
    not there), and the streams that were only listed."""
    origin = access(options.origin)
    listed = origin.list(options.prefix) if options.prefix is not None else []
    only_listed = [stream for stream in listed if stream not in options.streams]
    options = options.with_listed(listed)
    return options, states_of(origin, options.streams), only_listed


# How many streams' states planning asks for at once.
STATE_LOOKUPS = 16


def states_of(origin: Access, streams: Sequence[str]) -> dict[str, StreamState | None]:
    """What each stream is now (None: not there), asked of the origin a few at a time: a
    query over many streams waits about one round trip per `STATE_LOOKUPS` streams."""
    if len(streams) < 2:
        return {stream: origin.state(stream) for stream in streams}
    with ThreadPoolExecutor(min(len(streams), STATE_LOOKUPS)) as pool:
        return dict(zip(streams, pool.map(origin.state, streams), strict=True))


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


def read_partition(partition: SlicePartition) -> Iterator[tuple] | Iterator[pa.RecordBatch]:
    """What a source's `read` returns: Arrow batches to Spark (in a task), rows as tuples to
    a caller reading a partition by hand (outside any Spark task)."""
    if TaskContext.get() is None:
        return read_slice(partition)
    return read_slice_batches(partition)


def read_slice(partition: SlicePartition) -> Iterator[tuple]:
    """The rows of the partition's ranges, one tuple each, JSON parsed message by message."""
    parse = parser(partition.value_type) if partition.value_type is not None else None
    for piece in partition.slices:
        for batch in _reads(partition, piece):
            yield from rows(piece.stream, piece.content_type, batch, partition.as_text, parse)


def read_slice_batches(partition: SlicePartition) -> Iterator[pa.RecordBatch]:
    """The same rows as `read_slice`, as Arrow record batches (JSON parsed natively); each
    read is made while the one before becomes a batch (`fetched_ahead`)."""
    schema = arrow_schema(partition.as_text, partition.value_type)
    value_type = partition.value_type
    for piece, batch in fetched_ahead(_all_reads(partition)):
        built = record_batch(piece.stream, piece.content_type, batch, schema, value_type)
        if built is not None:
            yield built


def _all_reads(partition: SlicePartition) -> Iterator[tuple[StreamSlice, Read]]:
    """What reading the partition's ranges returns, range after range."""
    for piece in partition.slices:
        for batch in _reads(partition, piece):
            yield piece, batch


def _reads(partition: SlicePartition, piece: StreamSlice) -> Iterator[ReadBatch | SnapshotRead]:
    """What reading one stream's range returns (on an executor). Where retention dropped part
    of it (410 Gone naming the earliest offset kept), the read fails naming the range lost, or
    with failOnDataLoss=false reads on from the earliest offset kept, never past the range's
    end."""
    origin = access(partition.origin)
    while True:
        try:
            yield from origin.read(piece)
            return
        except OffsetGone as exc:
            asked = exc.offset.token if exc.offset is not None else piece.start
            earliest = exc.earliest_offset.token if exc.earliest_offset is not None else None
            skipped = after_gone(
                piece.stream, asked, earliest, piece.end, partition.fail_on_data_loss
            )
            log.warning("%s", skipped)
            if skipped.resume is None:
                return
            piece = replace(piece, start=skipped.resume)
        except (StreamNotFound, StreamGone) as exc:
            if partition.fail_on_data_loss:
                raise DataLoss(f"{exc}; set failOnDataLoss=false to read on without it") from exc
            return
