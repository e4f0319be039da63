"""The `durable_streams` source for Structured Streaming, and its admission control.

Offsets are `{stream: offset}` (canonical JSON). A micro-batch's range of each stream is read
with bounded reads (`until`), so a micro-batch replayed after a restart returns exactly the
same rows. `maxMessagesPerTrigger` and `maxBytesPerTrigger` bound a micro-batch (split evenly
between the streams); `Trigger.AvailableNow` reads up to the tails seen when the query starts.
A start that a stream's retention policy dropped is data loss (`_plan.after_gone`): the query
fails, or reads on from the earliest offset kept up to the end each micro-batch was planned with.
A compacted stream new to the query starts at its snapshot's token: its first micro-batch
reads the snapshot (taken whole by admission control), then the history after it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # Spark 4.0 and 4.1: no admission control, no AvailableNow of our own
    ReadAllAvailable = ReadLimit = ReadMaxBytes = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]
from pyspark.sql.types import StructType

from durable_streams_aws.client import OffsetGone, StreamGone, StreamNotFound

from ._access import access
from ._admission import Budget, admitted_end, canonical
from ._partitions import (
    SlicePartition,
    read_partition,
    resolve,
    slice_partitions,
    states_of,
    value_types,
)
from ._plan import (
    FIRST,
    OptionError,
    ReadOptions,
    StreamSlice,
    after_gone,
    before,
    log,
    lost,
    positive_option,
    rank,
)
from ._rows import SnapshotRead, rows


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions, settings: dict[str, str], schema: StructType) -> None:
        # Streams under a prefix are listed once, when the query starts.
        self.options, _, _ = resolve(options)
        self.access = access(self.options.origin)
        self.as_text, self.value_type = value_types(schema)
        self.budget = Budget(
            rows=positive_option(settings, "maxmessagespertrigger"),
            bytes=positive_option(settings, "maxbytespertrigger"),
        )
        if ReadLimit is None and not self.budget.unlimited:
            raise OptionError(
                "maxMessagesPerTrigger and maxBytesPerTrigger need Spark 4.2 or later"
            )
        self.previous: dict[str, str] | None = None  # the last end returned (Spark 4.0, 4.1)
        self.target: dict[str, str] | None = None  # AvailableNow: the tails when it started
        self.content_types: dict[str, str] = {}
        self.earliest: dict[str, str] = {}  # streams whose retention dropped data: where it ends

    def initialOffset(self) -> dict:
        """Where the query starts: `startingOffsets`, or each stream's earliest offset kept
        (its beginning, unless its retention policy dropped data: that is no loss)."""
        self._tails()
        starting = self.options.starting
        return canonical(
            {
                s: starting[s] if starting.get(s, "-1") != "-1" else self._first(s)
                for s in self.options.streams
            }
        )

    def _first(self, stream: str) -> str:
        """Where a stream new to the query starts: its earliest offset kept (a compacted
        stream's snapshot token: the first micro-batch reads the snapshot, then the history)."""
        return self.earliest.get(stream, FIRST)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.budget.rows is not None:
            return ReadMaxRows(self.budget.rows)
        if self.budget.bytes is not None:
            return ReadMaxBytes(self.budget.bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._tails()

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """Spark 4.2 and later pass where the next micro-batch starts and a read limit; 4.0
        and 4.1 pass neither (and then every micro-batch reads all that is available)."""
        if start is None:
            start = self.previous if self.previous is not None else self.initialOffset()
        tails = self._tails()  # every trigger: a stream deleted meanwhile is noticed
        # Streams the checkpoint does not know yet (added to the options, or newly under the
        # prefix) start at their beginning (the earliest offset kept).
        start = canonical({**{s: self._first(s) for s in self.options.streams}, **start})
        if self.target is not None:  # AvailableNow: no further than the tails at its start
            tails = {s: min(t, self.target[s]) for s, t in tails.items() if s in self.target}
        resume = {s: self._resume_point(s, start[s], tail) for s, tail in tails.items()}
        # Spark passes this reader's default limit (both budgets), or ReadAllAvailable.
        limited = limit is not None and not isinstance(limit, ReadAllAvailable)
        budget = self.budget if limited else Budget()
        ends = dict(tails)
        if not budget.unlimited:
            pending = [s for s in sorted(tails) if tails[s] != resume[s]]
            for stream, share in zip(pending, budget.shares(len(pending) or 1), strict=False):
                ends[stream] = self._admit(stream, resume[stream], tails[stream], share)
        self.previous = canonical({s: ends.get(s, start[s]) for s in start})
        return self.previous

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if not self.content_types:
            self._tails()
        pieces = [
            StreamSlice(
                stream, _from(start.get(stream, FIRST), end[stream]), end[stream], content_type
            )
            for stream in sorted(end)
            if end[stream] != start.get(stream, FIRST)
            and (content_type := self.content_types.get(stream)) is not None
        ]
        return slice_partitions(self.options, pieces, self.as_text, self.value_type)

    def read(self, partition: InputPartition) -> Iterator[tuple] | Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicePartition)
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to acknowledge: the checkpoint is the reader's only state

    def _tails(self) -> dict[str, str]:
        """The tail of each stream still there (a missing one is data loss), and where each
        one's retained data starts."""
        tails = {}
        for stream, state in states_of(self.access, self.options.streams).items():
            if state is None:
                lost(self.options, f"stream {stream!r} was deleted while the query ran")
                continue
            self.content_types[stream] = state.content_type
            if state.earliest is not None:
                self.earliest[stream] = state.earliest
            else:
                self.earliest.pop(stream, None)
            tails[stream] = state.tail
        return canonical(tails)

    def _resume_point(self, stream: str, start: str, tail: str) -> str:
        """Where the stream is read on from: `start`, or its beginning when it is now shorter
        than that (deleted and re-created: data loss, which may fail the query), or its
        earliest offset kept when its retention policy dropped `start` (data loss too).

        Only the next micro-batch's end is decided from this: its start stays the previous
        end, and its partitions meet the loss again when they read (and skip it the same way)."""
        if rank(tail) < rank(start):
            lost(self.options, f"stream {stream!r} ends before {start} (deleted and re-created?)")
            return self._first(stream)
        earliest = self.earliest.get(stream)
        if earliest is None or not before(start, earliest):
            return start
        skipped = after_gone(stream, start, earliest, tail, self.options.fail_on_data_loss)
        log.warning("%s", skipped)
        return skipped.resume if skipped.resume is not None else tail

    def _admit(self, stream: str, start: str, tail: str, share: Budget) -> str:
        """Read ahead on the driver to find where `share` of the pending rows ends."""
        content_type = self.content_types[stream]

        def pending() -> Iterator[tuple[str, int]]:
            piece = StreamSlice(stream, start, tail, content_type)
            for batch in self.access.read(piece):
                if isinstance(batch, SnapshotRead):
                    # Taken whole: a micro-batch ends after the snapshot, or further on.
                    yield batch.end, batch.size
                    continue
                for row in rows(stream, content_type, batch, as_text=False):
                    yield row[1], len(row[2])

        try:
            return admitted_end(start, pending(), share)
        except OffsetGone as exc:  # retention dropped more since `_tails`
            earliest = exc.earliest_offset.token if exc.earliest_offset is not None else None
            skipped = after_gone(stream, start, earliest, tail, self.options.fail_on_data_loss)
            log.warning("%s", skipped)
            if skipped.resume is None:
                return tail
            return self._admit(stream, skipped.resume, tail, share)
        except (StreamNotFound, StreamGone):
            lost(self.options, f"stream {stream!r} was deleted while the query ran")
            return start


def _from(start: str, end: str) -> str:
    """A micro-batch's start in a stream: an end before its start means the stream was
    re-created shorter, and is read from its beginning (see `_resume_point`)."""
    return FIRST if rank(end) < rank(start) else start
