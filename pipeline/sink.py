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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from itertools import chain, islice

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import Row

# Spark hands an Arrow writer record batches (no row is built in Python); Spark 4.0 (EMR's
# emr-spark-8.0.0) has no Arrow stream writer, and its writers get rows: both are taken.
try:
    from pyspark.sql.datasource import DataSourceArrowWriter as _BatchBase
except ImportError:  # pragma: no cover (Spark before 4.0 is not supported anyway)
    from pyspark.sql.datasource import DataSourceWriter as _BatchBase  # type: ignore[assignment]
try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamBase
except ImportError:  # Spark 4.0
    from pyspark.sql.datasource import DataSourceStreamWriter as _StreamBase  # type: ignore[assignment]

from durable_streams_aws.client import DurableStream, ProducerSettings, SyncIdempotentProducer
from durable_streams_aws.core.protocol.headers import is_json

from ._plan import OptionError

ROWS_AT_ONCE = 2000  # rows handed to the producer together, when Spark gives rows
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


def message_lists(rows: Iterable[pa.RecordBatch | Row]) -> Iterator[list[str | bytes | None]]:
    """The `message` column of a partition's rows, in order, a list at a time: a list per
    Arrow record batch, or per `ROWS_AT_ONCE` rows (a partition's are all one or the other)."""
    items = iter(rows)
    first = next(items, None)
    if first is None:
        return
    if isinstance(first, pa.RecordBatch):
        for batch in chain([first], items):
            yield batch.column("message").to_pylist()
        return
    chunk = [first, *islice(items, ROWS_AT_ONCE - 1)]
    while chunk:
        yield [row["message"] for row in chunk]
        chunk = list(islice(items, ROWS_AT_ONCE))


def write_partition(
    options: SinkOptions, epoch: int, rows: Iterable[pa.RecordBatch | Row]
) -> Written:
    """Append the messages of a partition's rows (Arrow record batches or rows, in order) as
    producer `<sinkId>-<partition>` at `epoch` (executor)."""
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
        for messages in message_lists(rows):
            producer.extend(json_values(messages, options.url) if options.json_stream else messages)
            count += len(messages)
        producer.flush()
    finally:
        producer.detach()
    return Written(partition, count)


def json_values(messages: list[str | bytes | None], url: str) -> list[object]:
    """The value of each message for a JSON stream (sent re-encoded): each must be one JSON
    text. Any that is not fails the write before anything of its batch is sent."""
    values = []
    for index, message in enumerate(messages):
        try:
            values.append(json.loads(message))  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"{url} is a JSON stream: message {index} of a batch is not a JSON text ({exc})"
            ) from None
    return values


class BatchWriter(_BatchBase):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch | Row]) -> WriterCommitMessage:
        return write_partition(self.options, self.options.epoch, iterator)


class StreamWriter(_StreamBase):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch | Row]) -> WriterCommitMessage:
        batch_id = TaskContext.get().getLocalProperty("streaming.sql.batchId")
        return write_partition(self.options, int(batch_id), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every partition's messages are acknowledged by the server when write() returns
