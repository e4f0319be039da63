"""The subscription rules as pure functions: pending work, wakes, leases, fencing, backoff.

Nothing here reads or writes: the service reads a subscription, asks these functions what to
do, and writes the answer with a condition on the version it read.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from ..storage.model import Retained
from .errors import SubscriptionError, invalid
from .model import (
    Ack,
    Link,
    LinkStatus,
    Skip,
    StreamTail,
    Subscription,
    Wake,
    WakeStream,
    offset_order,
    offset_token,
)

# A wake names at most this many streams (the rest stay pending for the next wake), which
# keeps the subscription item far below DynamoDB's 400 KB.
# 99: acking them all is one transaction with the subscription's own write (100 at most).
MAX_WAKE_STREAMS = 99
# Likewise the acks of one request: all of them and the subscription, one transaction.
MAX_ACKS = 99
MAX_WAKE_PATH_BYTES = 64 * 1024
FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0
RETRY_JITTER = 0.2


def link_statuses(
    links: Iterable[Link], tails: Mapping[str, StreamTail], now: float = 0.0
) -> tuple[LinkStatus, ...]:
    """Each link against its stream's tail. An ack recorded for another incarnation of the
    path (the stream was deleted and created again) counts as nothing acked. A link whose
    acked position is below the stream's retained start resumes at the earliest retained
    offset (`resumed_at_earliest`, decided at `now`)."""
    statuses = []
    for link in links:
        tail = tails.get(link.path, StreamTail(None, 0))
        same = link.incarnation is None or link.incarnation == tail.incarnation
        acked = min(link.acked, tail.tail) if same else 0
        exact = link.acked_exact and acked == link.acked
        snapshot = same and link.acked_snapshot and acked == link.acked
        skipped = link.skipped
        if skipped is not None and skipped.incarnation != tail.incarnation:
            skipped = None  # a move made in an incarnation since deleted
        status = LinkStatus(
            link, acked, tail.tail, tail.incarnation, exact, snapshot, skipped=skipped
        )
        statuses.append(resumed_at_earliest(status, tail.retained, now))
    return tuple(sorted(statuses, key=lambda status: status.link.path))


def resumed_at_earliest(status: LinkStatus, retained: Retained, now: float) -> LinkStatus:
    """The link as it resumes when its acked position is no longer retained: at the stream's
    earliest retained offset (a compacted stream's snapshot, or where its retained data
    starts), with the move to record (`resuming`). Otherwise the link as it is."""
    if status.incarnation is None or status.acked >= retained.start:
        return status
    if retained.snapshot is not None:
        position, snapshot = retained.snapshot.at, True
    else:
        position, snapshot = retained.start, False
    skip = Skip(
        offset_token(status.acked, status.acked_exact, status.acked_snapshot),
        offset_token(position, snapshot=snapshot),
        now,
        status.incarnation,
    )
    return replace(
        status,
        acked=position,
        acked_exact=False,
        acked_snapshot=snapshot,
        skipped=skip,
        resuming=True,
    )


def resumes(statuses: Iterable[LinkStatus]) -> tuple[Ack, ...]:
    """The moves up to the earliest retained offset that are decided and not yet recorded,
    as acks that record them (as many as one transaction with the subscription's write
    takes; the rest are recorded by a later write, and resume meanwhile all the same)."""
    moves = [
        Ack(s.link.path, s.acked, False, s.acked_snapshot, s.skipped)
        for s in statuses
        if s.resuming
    ]
    return tuple(moves[:MAX_ACKS])


def lease_expired(wake: Wake | None, now: float) -> bool:
    return wake is not None and wake.lease_expires_at is not None and wake.lease_expires_at <= now


def is_idle(subscription: Subscription, now: float) -> bool:
    """No wake in flight, or only one whose lease has run out."""
    return subscription.wake is None or lease_expired(subscription.wake, now)


def new_wake(
    subscription: Subscription, statuses: Iterable[LinkStatus], now: float, holder: str | None
) -> Subscription:
    """The subscription with a new wake announcing its pending streams. Its lease runs from
    now: a webhook's, a claimed pull-wake's (`holder`), and an unclaimed pull-wake's too,
    which is announced again (a new generation, a new wake event) if nobody claims it in
    time, so a wake event that was never written cannot hold the subscription for ever."""
    snapshot: list[WakeStream] = []
    size = 0
    for status in statuses:
        if not status.has_pending:
            continue
        size += len(status.link.path.encode())
        if len(snapshot) == MAX_WAKE_STREAMS or (snapshot and size > MAX_WAKE_PATH_BYTES):
            break
        snapshot.append(status.snapshot())
    wake = Wake(
        wake_id="w_" + secrets.token_urlsafe(12),
        generation=subscription.generation + 1,
        issued_at=now,
        lease_expires_at=now + subscription.lease_ttl,
        holder=holder,
        streams=tuple(snapshot),
    )
    return replace(subscription, generation=wake.generation, wake=wake)


def cleared(subscription: Subscription) -> Subscription:
    return replace(subscription, wake=None)


def extended(subscription: Subscription, now: float) -> Subscription:
    assert subscription.wake is not None
    wake = replace(subscription.wake, lease_expires_at=now + subscription.lease_ttl)
    return replace(subscription, wake=wake)


def fenced() -> SubscriptionError:
    return SubscriptionError(409, "FENCED", "this wake is no longer current")


def check_current(
    subscription: Subscription, generation: object, wake_id: object, now: float
) -> Wake:
    """The current wake, if the request names it and its lease has not run out (whether or
    not the expiry has been acted on yet); 409 FENCED otherwise."""
    wake = subscription.wake
    if (
        subscription.deleted
        or wake is None
        or type(generation) is not int  # not true, not 7.0
        or generation != wake.generation
        or wake_id != wake.wake_id
        or lease_expired(wake, now)
    ):
        raise fenced()
    return wake


class ClaimKind(Enum):
    TAKE = "take"  # claim the wake in flight
    NEW = "new"  # no usable wake: issue one and claim it
    BUSY = "busy"  # another worker holds a live lease


@dataclass(frozen=True)
class ClaimDecision:
    kind: ClaimKind
    holder: str | None = None


def decide_claim(subscription: Subscription, now: float) -> ClaimDecision:
    wake = subscription.wake
    if wake is None or lease_expired(wake, now):
        return ClaimDecision(ClaimKind.NEW)
    if wake.holder is not None:
        return ClaimDecision(ClaimKind.BUSY, wake.holder)
    return ClaimDecision(ClaimKind.TAKE)


def claimed(subscription: Subscription, worker: str, now: float) -> Subscription:
    assert subscription.wake is not None
    wake = replace(subscription.wake, holder=worker, lease_expires_at=now + subscription.lease_ttl)
    return replace(subscription, wake=wake)


def parse_acks(value: object) -> tuple[tuple[str, str], ...]:
    """The (stream, offset token) pairs of an ack body, shape-checked only."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid("acks must be an array")
    pairs = []
    for item in value:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("stream"), str)
            or not isinstance(item.get("offset"), str)
        ):
            raise invalid('each ack is {"stream": path, "offset": offset}')
        pairs.append((item["stream"], item["offset"]))
    return tuple(pairs)


def check_acks(
    acks: Iterable[Ack], statuses: Iterable[LinkStatus], announced: Iterable[WakeStream] = ()
) -> tuple[Ack, ...]:
    """The acks that move a cursor forward.

    An ack of a stream the wake `announced` is about the incarnation the wake announced: once
    that stream has gone (deleted, or deleted and created again) or been unlinked, the ack has
    nothing left to move and is dropped, so the worker can still end its wake and its other
    acks apply, and a new incarnation's bytes are never acked by an ack of the old one's.
    Any other ack of a stream that is not linked, or past its tail, is refused whole with
    409 INVALID_OFFSET: nothing is applied."""
    by_path = {status.link.path: status for status in statuses}
    snapshot = {stream.path: stream for stream in announced}
    forward: dict[str, Ack] = {}
    for ack in acks:
        status = by_path.get(ack.path)
        told = snapshot.get(ack.path)
        if told is not None and (status is None or status.incarnation != told.incarnation):
            continue
        if status is None:
            raise _invalid_offset(f"stream {ack.path!r} is not linked to this subscription")
        if ack.position > status.tail:
            raise _invalid_offset(f"offset for {ack.path!r} is past the stream's tail")
        best = forward.get(ack.path)
        acked = offset_order(status.acked, status.acked_snapshot)
        if ack.order > acked and (best is None or ack.order > best.order):
            forward[ack.path] = ack
    return tuple(forward.values())


def _invalid_offset(message: str) -> SubscriptionError:
    return SubscriptionError(409, "INVALID_OFFSET", message)


def retry_delay(failures: int, rng: random.Random | None = None) -> float:
    """Exponential backoff from 1 s to 60 s, with 20% jitter either way."""
    base = min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** max(0, failures - 1))
    jitter = (rng or random).uniform(1 - RETRY_JITTER, 1 + RETRY_JITTER)
    return base * jitter
