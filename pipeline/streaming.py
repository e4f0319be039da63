"""The `durable_streams` source for Structured Streaming, and its admission control.

Offsets are `{stream: offset}` (canonical JSON). A micro-batch's range of each stream is read
with bounded reads (`until`), so a micro-batch replayed after a restart returns exactly the
same rows. `maxMessagesPerTrigger` and `maxBytesPerTrigger` bound a micro-batch (split evenly
between the streams); `Trigger.AvailableNow` reads up to the tails seen when the query starts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from core.client import DurableStream, Offset

from ._admission import Budget, admitted_end, canonical
from ._plan import OptionError, ReadOptions, StreamSlice
from ._rows import rows
from .source import SlicePartition, heads, read_slice


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: ReadOptions, settings: dict[str, str], as_text: bool) -> None:
        self.options = options
        self.as_text = as_text
        self.budget = Budget(
            rows=_positive(settings, "maxmessagespertrigger"),
            bytes=_positive(settings, "maxbytespertrigger"),
        )
        self.target: dict[str, str] | None = None  # AvailableNow: the tails when it started
        self.content_types: dict[str, str] = {}

    def initialOffset(self) -> dict:
        return canonical({s: self.options.starting.get(s, "-1") for s in self.options.streams})

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.budget.rows is not None:
            return ReadMaxRows(self.budget.rows)
        if self.budget.bytes is not None:
            return ReadMaxBytes(self.budget.bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._tails()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        tails = self.target if self.target is not None else self._tails()
        budget = self.budget
        if isinstance(limit, ReadAllAvailable):
            budget = Budget()
        ends = dict(tails)
        if not budget.unlimited:
            pending = [s for s in sorted(tails) if tails[s] != start.get(s)]
            for stream, share in zip(pending, budget.shares(len(pending) or 1), strict=False):
                ends[stream] = self._admit(stream, start[stream], tails[stream], share)
        return canonical({s: ends.get(s, start[s]) for s in start})

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if not self.content_types:
            self._tails()
        return [
            SlicePartition(
                StreamSlice(
                    stream,
                    self.options.stream_url(stream),
                    start[stream],
                    end[stream],
                    self.content_types[stream],
                ),
                self.as_text,
            )
            for stream in sorted(end)
            if end[stream] != start.get(stream)
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, SlicePartition)
        return read_slice(partition)

    def commit(self, end: dict) -> None:
        pass  # nothing to acknowledge: the checkpoint is the reader's only state

    def _tails(self) -> dict[str, str]:
        infos = heads(self.options)
        self.content_types = {stream: info.content_type for stream, info in infos.items()}
        return canonical({stream: info.next_offset.token for stream, info in infos.items()})

    def _admit(self, stream: str, start: str, tail: str, share: Budget) -> str:
        """Read ahead on the driver to find where `share` of the pending rows ends."""
        content_type = self.content_types[stream]

        def pending() -> Iterator[tuple[str, int]]:
            with DurableStream(self.options.stream_url(stream)) as handle:
                for batch in handle.read(Offset(start), until=Offset(tail)):
                    for row in rows(stream, content_type, batch, as_text=False):
                        yield row[1], len(row[2])

        return admitted_end(start, pending(), share)


def _positive(settings: dict[str, str], name: str) -> int | None:
    value = settings.get(name)
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise OptionError(f"{name} must be a positive whole number, not {value!r}")
    return int(value)
