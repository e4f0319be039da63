"""The `durable_streams` sink: a DataFrame's `message` column appended to one stream, exactly
once, by one idempotent producer per query and partition.

Producer `<sinkId>-<partition>` writes micro-batch N at epoch N, numbering its requests from 0
and cutting them by size only (never by time), so a micro-batch replayed after a crash sends
the same messages under the same epoch and sequence numbers, and the server drops what it
already has. A batch write uses the epoch given by the `epoch` option (default 0): running the
same job again with the same `sinkId` and epoch appends nothing new.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from durable_streams_aws.client import DurableStream, ProducerSettings, SyncIdempotentProducer
from durable_streams_aws.core.protocol.headers import is_json

from ._plan import OptionError

# Requests are cut when this many bytes are buffered; no linger, so cuts depend on the data only.
CHUNK_BYTES = 256 * 1024
_NEVER = 1e9  # seconds: the producer sends only when a chunk is full or at the flush


@dataclass(frozen=True)
class SinkOptions:
    url: str  # the stream's URL
    sink_id: str
    epoch: int
    json_stream: bool = False  # whether messages are JSON texts to append as values
    token: str | None = field(default=None, repr=False)  # a bearer token allowing `append`

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        base = (options.get("url") or "").rstrip("/")
        stream = (options.get("stream") or "").strip("/")
        if not base.startswith(("http://", "https://")) or not stream:
            raise OptionError("options 'url' (the streams' base URL) and 'stream' are required")
        sink_id = options.get("sinkid") or ""
        if not sink_id or not all(c.isalnum() or c in "-_." for c in sink_id):
            raise OptionError("option 'sinkId' is required: letters, digits, '-', '_' or '.'")
        epoch = options.get("epoch", "0")
        if not epoch.isdigit():
            raise OptionError(f"option 'epoch' must be a whole number, not {epoch!r}")
        return cls(f"{base}/{stream}", sink_id, int(epoch), token=options.get("token") or None)

    def for_stream(self) -> SinkOptions:
        """These options with the stream's kind, looked up by HEAD (on the driver)."""
        with DurableStream(self.url, token=self.token) as stream:
            json_stream = is_json(stream.head().content_type)
        return replace(self, json_stream=json_stream)


@dataclass
class Written(WriterCommitMessage):
    partition: int
    messages: int


def write_partition(options: SinkOptions, epoch: int, batches: Iterator[pa.RecordBatch]) -> Written:
    """Append the messages of a partition's rows (Arrow record batches, in order) as producer
    `<sinkId>-<partition>` at `epoch` (executor)."""
    partition = TaskContext.get().partitionId()
    settings = ProducerSettings(linger=_NEVER, max_batch_bytes=CHUNK_BYTES)
    producer = SyncIdempotentProducer(
        options.url,
        f"{options.sink_id}-{partition}",
        epoch=epoch,
        settings=settings,
        token=options.token,
    )
    count = 0
    try:
        for batch in batches:
            messages = batch.column("message").to_pylist()
            # A JSON text is parsed (a message must be one JSON value) and sent re-encoded.
            producer.extend(map(json.loads, messages) if options.json_stream else messages)
            count += len(messages)
        producer.flush()
    finally:
        producer.detach()
    return Written(partition, count)


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.options, self.options.epoch, iterator)


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        batch_id = TaskContext.get().getLocalProperty("streaming.sql.batchId")
        return write_partition(self.options, int(batch_id), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every partition's messages are acknowledged by the server when write() returns
