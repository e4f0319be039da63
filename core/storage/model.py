"""The values the store exchanges with its callers."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from enum import Enum

from ..protocol.append import AppendDecision
from ..protocol.create import StreamConfig
from ..protocol.headers import ProducerClaim
from ..protocol.offsets import format_offset, format_snapshot_offset
from ..protocol.producer import ProducerState
from ..protocol.retention import RetentionPolicy
from ..protocol.ttl import oldest_live_access, sliding_expiry


@dataclass(frozen=True)
class Segment:
    """A contiguous range of a stream's positions stored under one incarnation."""

    incarnation: str
    start: int
    end: int


@dataclass(frozen=True)
class Snapshot:
    """A compacted stream's snapshot of its history below `at`: State Protocol messages in an
    S3 object (`core.storage._snapshots`), named by an item of the incarnation's partition."""

    at: int
    key: str
    size: int  # the messages' bytes
    count: int  # messages, the two control messages included
    folded: int  # bytes of history it stands for (the stream's start up to `at`)


@dataclass(frozen=True)
class Retained:
    """Where a stream's retained data starts, and the snapshot that stands for what is before
    it, if a compaction made one."""

    start: int = 0
    snapshot: Snapshot | None = None
    since: float = 0.0  # when the cut that made it took effect (0: none yet)

    @property
    def earliest_offset(self) -> str:
        """The offset a read from the beginning starts at."""
        if self.snapshot is not None:
            return format_snapshot_offset(self.snapshot.at)
        return format_offset(self.start)

    @property
    def dropped(self) -> bool:
        return self.start > 0


@dataclass(frozen=True)
class PendingCut:
    """A cut announced on a stream: from `effective_at` on, `retained` replaces the stream's
    retained start (and snapshot). Announced ahead so that shared caches have let go of what
    it drops by then (`core.protocol.retention`)."""

    retained: Retained
    effective_at: float


@dataclass(frozen=True)
class StreamInfo:
    """A consistent snapshot of one stream's metadata item."""

    path: str
    incarnation: str
    content_type: str
    tail: int
    closed: bool
    closed_by: ProducerClaim | None
    last_stream_seq: str | None
    ttl_seconds: int | None
    expires_at: float | None
    last_access: float
    created_at: float
    soft_deleted: bool = False
    forked_from: str | None = None
    source_incarnation: str | None = None
    fork_position: int = 0
    # Inherited ranges, oldest source first; the stream's own data starts at fork_position.
    inherited: tuple[Segment, ...] = ()
    ref_count: int = 0
    # Sliding TTL: reads within this many seconds of `last_access` are not recorded.
    renew_window: float = 0.0
    # Where the sealed part of its own data ends, as the sealer last recorded it (a hint).
    sealed: int = 0
    # Reserved ranges (`core.storage._ranges`). `tail` is where readable data ends; the item
    # stores a published tail at or below it (None: the same), and the reserved end at or
    # above it (None: the published tail), with the number of ranges allocated up to each.
    published: int | None = None
    reserved: int | None = None
    ranges: int = 0
    published_ranges: int = 0
    reserved_at: float = 0.0  # when the last range was reserved (Unix seconds)
    counted: bool = True  # the item holds the range counters (items older than them do not)
    held_until: float = 0.0  # a direct commit waiting: no range may be reserved until then
    # Retention (`core.protocol.retention`): the policy's header value, where retained data
    # starts, a cut announced to take effect later, and when the last cut took effect.
    retention: str | None = None
    retained: Retained = Retained()
    pending_cut: PendingCut | None = None
    compaction_refused: str | None = None
    # Compaction is not tried again until the sealed history reaches this position (a state
    # too large for a response may shrink; a history with other messages never folds).
    compaction_retry_at: int = 0

    def retained_now(self, now: float) -> Retained:
        """Where the stream's retained data starts at `now` (a pending cut counts once it is
        effective, whether or not a retention run has recorded it since)."""
        cut = self.pending_cut
        if cut is not None and now >= cut.effective_at:
            return cut.retained
        return self.retained

    @property
    def published_tail(self) -> int:
        return self.tail if self.published is None else self.published

    @property
    def reserved_end(self) -> int:
        return self.published_tail if self.reserved is None else self.reserved

    @property
    def settled(self) -> bool:
        """No range is pending above the published tail: all of it is readable."""
        return self.reserved_end == self.published_tail

    def expiry_time(self) -> float | None:
        candidates = []
        if self.expires_at is not None:
            candidates.append(self.expires_at)
        if self.ttl_seconds is not None:
            candidates.append(sliding_expiry(self.last_access, self.ttl_seconds, self.renew_window))
        return min(candidates) if candidates else None

    def oldest_live_access(self, now: float) -> float | None:
        """For TTL streams, the access time a conditional write must see exceeded to know the
        stream is still alive at `now`."""
        if self.ttl_seconds is None:
            return None
        return oldest_live_access(now, self.ttl_seconds, self.renew_window)

    def is_expired(self, now: float) -> bool:
        expiry = self.expiry_time()
        return expiry is not None and now >= expiry

    def segments(self) -> tuple[Segment, ...]:
        """Where every position up to the tail is stored, in order."""
        return (*self.inherited, Segment(self.incarnation, self.fork_position, self.tail))

    def ending_at(self, position: int) -> StreamInfo:
        """The stream as a read that must stop at `position` sees it: its own data ending
        there (a read takes nothing past its last segment's end), so that a read's budget is
        not spent on data it would drop. Itself when `position` is at or past the tail, or
        lies in what a fork inherited (whose segments end where the fork began)."""
        if position >= self.tail or position < self.fork_position:
            return self
        return replace(self, tail=position)

    def segments_until(self, position: int) -> tuple[Segment, ...]:
        """What a fork at `position` inherits: the non-empty parts of our segments below it."""
        clipped = (
            Segment(seg.incarnation, seg.start, min(seg.end, position)) for seg in self.segments()
        )
        return tuple(seg for seg in clipped if seg.end > seg.start)

    @property
    def config(self) -> StreamConfig:
        return StreamConfig(
            content_type=self.content_type,
            ttl_seconds=self.ttl_seconds,
            expires_at=self.expires_at,
            closed=self.closed,
            forked_from=self.forked_from,
            fork_position=self.fork_position if self.forked_from is not None else None,
            retention=self.retention,
        )


@dataclass(frozen=True)
class Payload:
    """Bytes to append; for JSON streams, the lengths of the messages they hold."""

    data: bytes = b""
    message_lengths: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class ForkRequest:
    source_path: str
    anchor: int | None  # Stream-Fork-Offset as a position; None means the source's tail
    sub_offset: int = 0  # JSON: messages past the anchor; other types: bytes


@dataclass(frozen=True)
class CreateSpec:
    """A PUT. For a fork, a content type or expiry left as None is inherited."""

    content_type: str | None
    ttl_seconds: int | None = None
    expires_at: float | None = None
    closed: bool = False
    payload: Payload = field(default_factory=Payload)
    fork: ForkRequest | None = None
    retention: RetentionPolicy | None = None


class CreateStatus(Enum):
    CREATED = "created"
    EXISTS = "exists"  # same configuration: idempotent success
    CONFLICT = "conflict"  # a different stream (or a soft-deleted one) holds this path
    SOURCE_NOT_FOUND = "source_not_found"
    SOURCE_GONE = "source_gone"  # the fork source is soft-deleted
    CONTENT_TYPE_MISMATCH = "content_type_mismatch"
    OFFSET_BEYOND_TAIL = "offset_beyond_tail"
    OFFSET_GONE = "offset_gone"  # below the source's earliest retained position
    OFFSET_NOT_A_BOUNDARY = "offset_not_a_boundary"  # inside a message of a JSON source
    SUB_OFFSET_OVERSHOOT = "sub_offset_overshoot"


@dataclass(frozen=True)
class CreateOutcome:
    status: CreateStatus
    info: StreamInfo | None = None


class Presence(Enum):
    FOUND = "found"
    NOT_FOUND = "not_found"
    GONE = "gone"  # soft-deleted: kept only for the forks that read it


@dataclass(frozen=True)
class AppendOutcome:
    presence: Presence
    decision: AppendDecision | None = None
    info: StreamInfo | None = None  # after the commit when it committed
    producer: ProducerState | None = None  # the producer's state to report


@dataclass(frozen=True)
class ReadBatch:
    """Data from `start` up to `end`; `messages` is set for JSON streams instead of `data`.

    A JSON batch holds whole messages. Bytes are read in whole appends, except when a single
    append is larger than a response may be: `ends` lists the positions in (start, end] where
    an append ends (or where nothing says one does not: history sealed before appends were
    recorded), so a batch can be cut cleanly, and `inside` says its end is not one of them."""

    start: int
    end: int
    data: bytes = b""
    messages: tuple[bytes, ...] | None = None
    ends: tuple[int, ...] = ()
    # An empty batch read at an exact offset (one cut inside an append): named the same way.
    exact_empty: bool = False

    @property
    def inside(self) -> bool:
        """The batch ends inside an append (its end is named with an exact offset)."""
        if self.messages is not None:
            return False
        if self.end == self.start:
            return self.exact_empty
        return not self.ends_at(self.end)

    def head(self, count: int) -> ReadBatch:
        """The first `count` messages (JSON) or bytes of this batch."""
        if self.messages is not None:
            if count >= len(self.messages):
                return self
            dropped = sum(map(len, self.messages[count:]))
            return ReadBatch(self.start, self.end - dropped, messages=self.messages[:count])
        if count >= len(self.data):
            return self
        return self._bytes_to(self.start + count)

    def clean_cut(self, count: int) -> int:
        """The longest prefix of at most `count` bytes that ends where an append does; `count`
        itself when not even the first append fits (it is cut inside)."""
        fitting = bisect.bisect_right(self.ends, self.start + count)
        return self.ends[fitting - 1] - self.start if fitting else count

    def ends_at(self, position: int) -> bool:
        """Whether an append ends at `position`."""
        index = bisect.bisect_left(self.ends, position)
        return index < len(self.ends) and self.ends[index] == position

    def before(self, bound: int) -> ReadBatch:
        """This batch without what lies past `bound`: for JSON, only the messages that end at
        or before it; for bytes, exactly up to it."""
        if self.end <= bound:
            return self
        if self.messages is not None:
            end, keep = self.end, len(self.messages)
            while keep and end > bound:
                keep -= 1
                end -= len(self.messages[keep])
            return ReadBatch(self.start, end, messages=self.messages[:keep])
        return self._bytes_to(max(self.start, bound))

    def _bytes_to(self, end: int) -> ReadBatch:
        ends = self.ends[: bisect.bisect_right(self.ends, end)]
        return ReadBatch(self.start, end, data=self.data[: end - self.start], ends=ends)


def bounded_read_budget(span: int, json_mode: bool) -> int:
    """What a read must be allowed to take (its `max_bytes`) for `span` bytes of data from
    where it starts to come in one read: a JSON read's budget counts the body it is served
    as, a separator per message and the brackets too, and a message is at least a byte."""
    return 2 * span + 2 if json_mode else span


@dataclass(frozen=True)
class StreamPage:
    """Some of the streams under a prefix, and where the listing goes on (None: it is done)."""

    paths: tuple[str, ...]
    cursor: str | None
    # The listed streams' items as the scan read them, in the order of `paths` (the console's
    # table shows them without a read per stream).
    infos: tuple[StreamInfo, ...] = ()


class InvalidCursor(ValueError):
    """A listing cursor this store did not give out."""


class StoreUnavailable(Exception):
    """AWS throttled or failed past the retry budget; the caller should retry later."""

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after
