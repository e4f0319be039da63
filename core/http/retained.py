"""Where a read starts on a stream retention has cut: the position, the snapshot, or 410.

Pure: decided from the stream's retained start (`StreamInfo.retained_now`) and the parsed
offset. A read from the beginning starts at the earliest retained offset (a compacted stream's
snapshot, or where its retained data starts); an offset below it is gone; a snapshot's token
reads that snapshot while it is the stream's, and is gone once a later compaction replaced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..protocol.errors import bad_request
from ..protocol.offsets import ReadStart, StartKind, format_offset, format_snapshot_offset
from ..storage.model import Retained


class StartFrom(Enum):
    POSITION = "position"  # read as usual from `ReadStart.resolve`, or `position` when set
    SNAPSHOT = "snapshot"  # the snapshot, then the data after it
    GONE = "gone"  # below the earliest retained offset: 410


@dataclass(frozen=True)
class RetainedStart:
    kind: StartFrom
    position: int | None = None  # for POSITION: where a read from the beginning starts


def retained_start(retained: Retained, start: ReadStart) -> RetainedStart:
    if start.kind is StartKind.NOW:
        return RetainedStart(StartFrom.POSITION)
    if start.kind is StartKind.BEGINNING:
        if retained.snapshot is not None:
            return RetainedStart(StartFrom.SNAPSHOT)
        return RetainedStart(StartFrom.POSITION, retained.start)
    if start.snapshot:
        if retained.snapshot is not None and retained.snapshot.at == start.position:
            return RetainedStart(StartFrom.SNAPSHOT)
        if start.position > retained.start:
            raise bad_request("no snapshot of this stream has that offset")
        return RetainedStart(StartFrom.GONE)
    if start.position < retained.start:
        return RetainedStart(StartFrom.GONE)
    return RetainedStart(StartFrom.POSITION)


def asked_offset(start: ReadStart) -> str:
    """The offset a read asked for, as a token (for the 410's message)."""
    if start.snapshot:
        return format_snapshot_offset(start.position)
    return format_offset(
        start.position, inside=start.kind is StartKind.POSITION and not start.whole
    )
