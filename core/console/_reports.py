"""What the console's API answers, as JSON-ready dicts: pure functions of store values, apart
from the I/O that fetched them (`_api`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..protocol.headers import format_expires_at
from ..protocol.offsets import format_offset
from ..protocol.producer import ProducerState
from ..storage.model import StreamInfo
from ..subscriptions.model import LinkStatus, Subscription, offset_token


def _when(timestamp: float | None) -> str | None:
    return format_expires_at(timestamp) if timestamp else None


def last_activity(info: StreamInfo) -> float | None:
    """When the stream was last appended to, as its item tells: a direct commit sets its access
    time, a reserved range its reservation time; a TTL stream's access time also moves when a
    read renews it. None for a stream nothing was ever appended to."""
    if info.tail == 0:
        return None
    return max(info.last_access, info.reserved_at) or None


def stream_row(info: StreamInfo) -> dict[str, Any]:
    """A stream as the console's list shows it."""
    return {
        "path": info.path,
        "content_type": info.content_type,
        "bytes": info.tail,
        "tail_offset": format_offset(info.tail),
        "closed": info.closed,
        "ttl_seconds": info.ttl_seconds,
        "expires_at": _when(info.expiry_time()),
        "last_activity": _when(last_activity(info)),
        "created_at": _when(info.created_at),
        "forked_from": info.forked_from,
    }


def stream_internals(
    info: StreamInfo, producers: Iterable[tuple[str, ProducerState]], now: float
) -> dict[str, Any]:
    """A stream as an operator sees it: its producers, how much is sealed, its fork origin and
    references, its retention."""
    own = info.tail - info.fork_position  # what it holds itself, past what it inherited
    sealed = max(0, min(info.sealed, info.tail) - info.fork_position)
    retained = info.retained_now(now)
    cut = info.pending_cut
    pending = None
    if cut is not None and now < cut.effective_at:
        pending = {
            "earliest_offset": cut.retained.earliest_offset,
            "effective_at": format_expires_at(cut.effective_at),
        }
    return {
        **stream_row(info),
        "sealed_bytes": sealed,
        "sealed_share": round(sealed / own, 4) if own > 0 else 0.0,
        "ref_count": info.ref_count,
        "fork_offset": format_offset(info.fork_position) if info.forked_from else None,
        "retention": info.retention,
        "earliest_offset": retained.earliest_offset if retained.dropped else None,
        "pending_cut": pending,
        "compaction_refused": info.compaction_refused,
        "producers": [
            {"id": producer_id, "epoch": state.epoch, "last_seq": state.last_seq}
            for producer_id, state in sorted(producers)
        ],
    }


def subscription_internals(
    subscription: Subscription, statuses: Sequence[LinkStatus]
) -> dict[str, Any]:
    """A subscription as an operator sees it: each link against its stream's tail, the wake in
    flight and the webhook's failures."""
    config = subscription.config
    wake = subscription.wake
    return {
        "id": subscription.id,
        "type": config.delivery.value,
        "pattern": config.pattern,
        "description": config.description,
        "status": subscription.status,
        "failed_attempts": subscription.failed_attempts,
        "next_attempt_at": _when(subscription.next_attempt_at),
        "webhook_url": config.webhook_url,
        "wake_stream": config.wake_stream,
        "created_at": _when(subscription.created_at),
        "wake": None
        if wake is None
        else {
            "id": wake.wake_id,
            "issued_at": _when(wake.issued_at),
            "lease_expires_at": _when(wake.lease_expires_at),
            "holder": wake.holder,
            "streams": len(wake.streams),
        },
        "links": [
            {
                "path": status.link.path,
                "link_type": status.link.link_type.value,
                "acked_offset": offset_token(
                    status.acked, status.acked_exact, status.acked_snapshot
                ),
                "tail_offset": format_offset(status.tail),
                "behind_bytes": max(0, status.tail - status.acked),
                "has_pending": status.has_pending,
            }
            for status in statuses
        ],
    }
