"""Issuing a wake: when a subscription is idle and has pending work, write a new wake and
send it on its way (a webhook delivery task, or a wake event and a lease timer)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import replace

from ..storage.aws import Conflict
from ._context import Context
from ._retry import retry_on_conflict
from .model import Delivery, LinkStatus, Subscription, Wake
from .rules import cleared, is_idle, new_wake
from .tasks import Task, TaskKind

logger = logging.getLogger("dsaws.subscriptions")


class WakeIssuer:
    def __init__(self, context: Context) -> None:
        self.context = context

    def wake(self, subscription: Subscription) -> bool:
        """Issue a wake if the subscription is idle and has pending work; True if issued.
        Decides on the copy given, then on a fresh read after each lost race."""
        store, clock = self.context.store, self.context.clock
        current = subscription

        def attempt() -> tuple[Subscription, tuple[LinkStatus, ...], float] | None:
            nonlocal current
            now = clock()
            if current.deleted or not is_idle(current, now):
                return None
            statuses = self.context.statuses(current)
            if not any(status.has_pending for status in statuses):
                # An expired lease is cleared, and links no longer retained moved up.
                if current.wake is not None or any(status.resuming for status in statuses):
                    with contextlib.suppress(Conflict):
                        self.context.write(cleared(current), current.version, statuses)
                return None
            woken = new_wake(current, statuses, now, holder=None)
            delay = max(0.0, current.next_attempt_at - now)
            if woken.wake is not None and woken.wake.lease_expires_at is not None:
                # A webhook whose delivery waits for its backoff is leased from the send.
                wake = replace(woken.wake, lease_expires_at=woken.wake.lease_expires_at + delay)
                woken = replace(woken, wake=wake)
            try:
                return self.context.write(woken, current.version, statuses), statuses, delay
            except Conflict:
                latest = store.get(current.id)
                if latest is None:
                    return None
                current = latest
                raise

        issued = retry_on_conflict(attempt)
        if issued is None:
            return False
        self._dispatch(*issued)
        return True

    def _dispatch(
        self, subscription: Subscription, statuses: Sequence[LinkStatus], delay: float
    ) -> None:
        wake = subscription.wake
        assert wake is not None
        if subscription.config.delivery is Delivery.WEBHOOK:
            # The lease's timer is set by the delivery: a wake acked by its answer needs none
            # (and a delivery that never ran is found by the sweep).
            task = Task(TaskKind.DELIVER, subscription.id, wake.generation)
            self.context.scheduler.send(task, delay)
        else:
            # The timer first: a wake event that cannot be written (the store is busy) must
            # not leave the wake without one. Unclaimed by then, it is announced again.
            self.schedule_expiry(subscription)
            self._write_wake_event(subscription, wake)

    def schedule_expiry(self, subscription: Subscription) -> None:
        """Set the timer of the subscription's current lease, if it has one."""
        wake = subscription.wake
        if wake is not None and wake.lease_expires_at is not None:
            delay = max(0.0, wake.lease_expires_at - self.context.clock())
            expiry = Task(TaskKind.EXPIRE, subscription.id, wake.generation, wake.lease_expires_at)
            self.context.scheduler.send(expiry, delay)

    def _write_wake_event(self, subscription: Subscription, wake: Wake) -> None:
        stream = wake.streams[0].path if wake.streams else None
        event = {
            "type": "wake",
            "subscription_id": subscription.id,
            "stream": stream,
            "generation": wake.generation,
            "ts": int(self.context.clock() * 1000),
        }
        wake_stream = subscription.config.wake_stream
        assert wake_stream is not None
        if not self.context.streams.append_json(wake_stream, event):
            # No wake stream to write to: the wake stays in flight for a claim to take.
            logger.warning(
                "subscription %s: wake stream %s is missing or closed", subscription.id, wake_stream
            )
