"""Fork resolution: which live stream a fork reads from, and the position it diverges at.

A fork shares its source's history up to its fork position: the new stream item records the
source's path and incarnation, the position, and the source's segments below it (inherited,
`StreamInfo.segments_until`), so reads of the fork stitch the source's chunks below the
position to its own above. The position is the anchor (the source's tail when none is given)
moved on by the sub-offset (messages for JSON streams, bytes otherwise), and it must be a
place a read can start at: at most the source's readable tail, and for JSON on a message
boundary. The source is counted as referenced by the create's own transaction
(`_requests.reference_source`), so it is never removed while a fork reads from it.
"""

from __future__ import annotations

import time
from typing import Protocol

from ..protocol.fork import inherit_expiry
from ..protocol.headers import DEFAULT_CONTENT_TYPE, is_json, media_type
from .model import CreateOutcome, CreateSpec, CreateStatus, ForkRequest, ReadBatch, StreamInfo

# A JSON source is read this much at a time while counting messages past an anchor.
_COUNTING_READ_BYTES = 1 << 20


class SourceReads(Protocol):
    """What resolving a fork reads: the source as clients see it, and its data."""

    def get(self, path: str) -> StreamInfo | None: ...

    def read(
        self, info: StreamInfo, start: int, max_bytes: int, whole: bool = False
    ) -> ReadBatch: ...


def resolve_fork(
    reads: SourceReads, spec: CreateSpec, fork: ForkRequest
) -> CreateOutcome | tuple[StreamInfo, int]:
    """The live source and the position a fork of it diverges at, or why there is none."""
    source = reads.get(fork.source_path)
    if source is None:
        return CreateOutcome(CreateStatus.SOURCE_NOT_FOUND)
    if source.soft_deleted:
        return CreateOutcome(CreateStatus.SOURCE_GONE, source)
    if spec.content_type is not None and media_type(spec.content_type) != media_type(
        source.content_type
    ):
        return CreateOutcome(CreateStatus.CONTENT_TYPE_MISMATCH, source)
    anchor = source.tail if fork.anchor is None else fork.anchor
    if anchor > source.tail:
        return CreateOutcome(CreateStatus.OFFSET_BEYOND_TAIL, source)
    if anchor < retention_floor(source, time.time()):
        # History retention dropped (or a cut announced will): no fork can be made of it.
        return CreateOutcome(CreateStatus.OFFSET_GONE, source)
    if is_json(source.content_type) and not _at_message_boundary(reads, source, anchor):
        # A fork cut inside a message would hold half of it: no read could return it.
        return CreateOutcome(CreateStatus.OFFSET_NOT_A_BOUNDARY, source)
    position = _advance(reads, source, anchor, fork.sub_offset)
    if position is None:
        return CreateOutcome(CreateStatus.SUB_OFFSET_OVERSHOOT, source)
    return source, position


def retention_floor(source: StreamInfo, now: float) -> int:
    """The lowest position a fork of `source` may start at: where its retained data starts,
    or where a cut already announced will make it start."""
    floor = source.retained_now(now).start
    if source.pending_cut is not None:
        floor = max(floor, source.pending_cut.retained.start)
    return floor


def _at_message_boundary(reads: SourceReads, source: StreamInfo, position: int) -> bool:
    """Whether a message of this JSON stream starts (or its tail is) at `position`."""
    if position in {0, source.tail}:
        return True
    batch = reads.read(source, position, 1)  # the first whole message from there
    if batch.start > position:
        return True  # a void range begins here: the end of a range, so of a message
    first = batch.messages[0] if batch.messages else None
    return first is not None and batch.end - len(first) == position


def _advance(reads: SourceReads, source: StreamInfo, anchor: int, units: int) -> int | None:
    """The position `units` past `anchor`: messages for JSON, bytes otherwise."""
    if units == 0:
        return anchor
    if not is_json(source.content_type):
        return anchor + units if anchor + units <= source.tail else None
    position, remaining = anchor, units
    while remaining > 0 and position < source.tail:
        batch = reads.read(source, position, _COUNTING_READ_BYTES)
        position = max(position, batch.start)  # past a void range, which holds none
        for message in (batch.messages or ())[:remaining]:
            position += len(message)
            remaining -= 1
        if batch.end == position and not batch.messages:
            break
    return position if remaining == 0 else None


def new_stream_settings(
    spec: CreateSpec, source: StreamInfo | None
) -> tuple[str, int | None, float | None]:
    """A new stream's content type, TTL and expiry time: a fork takes its source's content
    type, and its source's TTL and expiry unless it asks for its own
    (`protocol.fork.inherit_expiry`)."""
    if source is None:
        return spec.content_type or DEFAULT_CONTENT_TYPE, spec.ttl_seconds, spec.expires_at
    ttl, expires_at = inherit_expiry(
        source.ttl_seconds, source.expires_at, spec.ttl_seconds, spec.expires_at
    )
    return source.content_type, ttl, expires_at
