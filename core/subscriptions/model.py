"""Subscription values: the configuration a client sends, and the state the server keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum

from ..protocol.offsets import format_offset, format_snapshot_offset
from ..storage.model import Retained


class Delivery(Enum):
    WEBHOOK = "webhook"
    PULL_WAKE = "pull-wake"


class LinkType(Enum):
    GLOB = "glob"
    EXPLICIT = "explicit"


@dataclass(frozen=True)
class SubscriptionConfig:
    """What a PUT configures; two PUTs with equal configs re-confirm one subscription."""

    delivery: Delivery
    pattern: str | None
    streams: tuple[str, ...]  # explicit paths, sorted and without repeats
    webhook_url: str | None
    wake_stream: str | None
    lease_ttl_ms: int
    description: str | None


@dataclass(frozen=True)
class WakeStream:
    """One pending stream as a wake announced it: enough to tell the recipient, and to ack
    the snapshot (a webhook's {"done": true}) without reading anything again."""

    path: str
    link_type: str
    acked: int
    tail: int
    incarnation: str | None  # of the stream at the snapshot: an ack applies to it only
    acked_exact: bool = False  # acked at an offset cut inside an append (named with `_i`)
    acked_snapshot: bool = False  # at a compacted stream's snapshot (see `Link`)

    def report(self) -> dict[str, object]:
        return {
            "path": self.path,
            "link_type": self.link_type,
            "acked_offset": offset_token(self.acked, self.acked_exact, self.acked_snapshot),
            "tail_offset": format_offset(self.tail),
            "has_pending": self.tail > self.acked or self.acked_snapshot,
        }


def offset_token(position: int, exact: bool = False, snapshot: bool = False) -> str:
    """The token of an acked position: plain, cut inside an append (`_i`), or the snapshot a
    compaction folded the history below `position` into (`_s`)."""
    return format_snapshot_offset(position) if snapshot else format_offset(position, exact)


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Skip:
    """A link moved up to its stream's earliest retained offset: the offset it had acked was
    no longer retained (a retention run dropped it, or a compaction folded it into a
    snapshot). Recorded on the link, for the subscription's description."""

    from_offset: str  # the acked offset that was gone
    to_offset: str  # the earliest retained offset, where the link resumed
    at: float  # when it was moved (Unix seconds)
    incarnation: str | None  # of the stream it was moved in: shown while that one lives

    def report(self) -> dict[str, object]:
        return {"from": self.from_offset, "to": self.to_offset, "at": _iso(self.at)}


@dataclass(frozen=True)
class Wake:
    """The wake in flight: issued, maybe held by a worker, until acked done, released or its
    lease expires. `streams` is the snapshot of pending streams it announced."""

    wake_id: str
    generation: int
    issued_at: float
    lease_expires_at: float | None  # None: a pull-wake nobody has claimed yet
    holder: str | None = None
    streams: tuple[WakeStream, ...] = ()


@dataclass(frozen=True)
class Subscription:
    id: str
    incarnation: str  # a fresh value per creation: links of a deleted namesake never apply
    config: SubscriptionConfig
    config_hash: str
    created_at: float
    version: int  # bumped by every write: the optimistic-concurrency fence
    generation: int = 0
    wake: Wake | None = None
    explicit: frozenset[str] = frozenset()  # explicit links, the config's and those added
    deleted: bool = False
    failed_attempts: int = 0  # webhook deliveries failed in a row
    next_attempt_at: float = 0.0  # no webhook delivery before this time (retry backoff)
    # The stream root's URL as the creating client saw it: callback URLs are built on it.
    public_root: str = ""
    backfilled: bool = False  # the creation linked the streams that existed then
    deleted_at: float = 0.0  # when it was removed (a tombstone)
    links_dropped: bool = False  # a tombstone whose link items are all deleted, for good

    @property
    def status(self) -> str:
        return "failed" if self.failed_attempts else "active"

    @property
    def lease_ttl(self) -> float:
        return self.config.lease_ttl_ms / 1000


@dataclass(frozen=True)
class Link:
    """One linked stream and how far the subscription has processed it. `acked` is a byte
    position of incarnation `incarnation` (None: of whatever incarnation comes first)."""

    path: str
    glob: bool
    explicit: bool
    acked: int
    incarnation: str | None
    # Acked at an offset cut inside an append: it names that byte exactly (`_i`), and a
    # worker that resumes there must not start again at the append's start.
    acked_exact: bool = False
    # At a compacted stream's snapshot of its history below `acked` (`_s`): the snapshot is
    # still to be read, then the data from `acked` on.
    acked_snapshot: bool = False
    skipped: Skip | None = None  # the last time retention moved it up

    @property
    def link_type(self) -> LinkType:
        return LinkType.EXPLICIT if self.explicit else LinkType.GLOB


@dataclass(frozen=True)
class StreamTail:
    """A linked stream's tail as last read: None when the stream is absent. `retained`: where
    its retained data starts (`StreamInfo.retained_now`)."""

    incarnation: str | None
    tail: int
    retained: Retained = field(default_factory=Retained)


@dataclass(frozen=True)
class LinkStatus:
    link: Link
    acked: int  # the acked position in the stream's current incarnation
    tail: int
    incarnation: str | None = None  # the stream's current one (None: absent)
    acked_exact: bool = False  # see `Link.acked_exact`
    acked_snapshot: bool = False  # see `Link.acked_snapshot`
    skipped: Skip | None = None  # the link's last move up to the earliest retained offset
    # That move is decided (`acked` is already where it resumes) and not yet recorded.
    resuming: bool = False

    def snapshot(self) -> WakeStream:
        kind = self.link.link_type.value
        return WakeStream(
            self.link.path,
            kind,
            self.acked,
            self.tail,
            self.incarnation,
            self.acked_exact,
            self.acked_snapshot,
        )

    @property
    def has_pending(self) -> bool:
        return self.tail > self.acked or self.acked_snapshot


def stream_report(status: LinkStatus) -> dict[str, object]:
    """A linked stream as GET describes it; `skipped`: where it last resumed at the
    stream's earliest retained offset, having acked one no longer retained (null: never)."""
    return {
        "path": status.link.path,
        "link_type": status.link.link_type.value,
        "acked_offset": offset_token(status.acked, status.acked_exact, status.acked_snapshot),
        "skipped": status.skipped.report() if status.skipped is not None else None,
    }


@dataclass(frozen=True)
class Ack:
    path: str
    position: int
    exact: bool = False  # an offset cut inside an append (`_i`)
    snapshot: bool = False  # a compacted stream's snapshot of the history below `position`
    skipped: Skip | None = None  # a move up to the earliest retained offset, to record

    @property
    def order(self) -> tuple[int, int]:
        return offset_order(self.position, self.snapshot)


def offset_order(position: int, snapshot: bool = False) -> tuple[int, int]:
    """How acked offsets compare: by position, a snapshot's token just before its position's
    own (as the tokens sort)."""
    return position, 0 if snapshot else 1


@dataclass(frozen=True)
class WakeFence:
    """The wake a request names, as the request sent it (unchecked: the current wake and the
    request's token decide whether it is that wake)."""

    generation: object
    wake_id: object


@dataclass(frozen=True)
class Completion:
    """A callback's or a pull-wake ack's content: cursors to move, and whether the wake is
    over (`done`) or goes on (a heartbeat, which extends the lease)."""

    done: bool
    acks: tuple[Ack, ...] = ()


@dataclass(frozen=True)
class WakeReport:
    """What a wake's recipient is told about each linked stream."""

    statuses: tuple[LinkStatus, ...] = field(default_factory=tuple)

    @property
    def pending(self) -> tuple[LinkStatus, ...]:
        return tuple(status for status in self.statuses if status.has_pending)
