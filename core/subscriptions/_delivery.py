"""The delivery worker: runs the tasks the append path, the operations and retries queue
(notices, webhook deliveries, lease expiries, checks), and the sweep that stands in for any
task that was lost."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TypeVar
from urllib.parse import quote

from ..storage.aws import Conflict
from ..telemetry import Metric
from ._context import TOKEN_LIFETIME, Context, names
from ._issuing import WakeIssuer
from ._linking import Linker
from ._retry import WriteContention, retry_on_conflict
from ._tokens import WakeToken
from .model import Ack, Delivery, Link, Subscription, Wake, offset_order
from .ports import Sent
from .rules import cleared, is_idle, lease_expired, retry_delay
from .tasks import Task, TaskKind

logger = logging.getLogger("dsaws.subscriptions")
# Tries of a delivery's write that keeps losing races before leaving it to the lease and the
# sweep (a worker's write, unlike a request's, has a fallback).
DELIVERY_ATTEMPTS = 10
T = TypeVar("T")


class DeliveryWorker:
    def __init__(self, context: Context, linker: Linker, issuer: WakeIssuer) -> None:
        self.context = context
        self.linker = linker
        self.issuer = issuer

    def run(self, tasks: Sequence[Task]) -> list[Task]:
        """One round of work: notices merged into one pass over the subscriptions, then the
        rest in order. Answers the tasks that failed, to be run again (SQS's redelivery, or
        the in-process queue's retry); every task may run more than once."""
        notices = [task for task in tasks if task.kind is TaskKind.NOTICE]
        failed = [] if not notices or self.notice({t.target for t in notices}) else notices
        deliveries = [task for task in tasks if task.kind is TaskKind.DELIVER]
        if len(deliveries) > 1:  # webhooks wait on their receivers: in parallel
            with ThreadPoolExecutor(min(8, len(deliveries)), "subscriptions-delivery") as pool:
                done = list(pool.map(self._run_one, deliveries))
        else:
            done = [self._run_one(task) for task in deliveries]
        failed += [task for task, ok in zip(deliveries, done, strict=True) if not ok]
        others = [task for task in tasks if task.kind in {TaskKind.EXPIRE, TaskKind.CHECK}]
        failed += [task for task in others if not self._run_one(task)]
        return failed

    def _run_one(self, task: Task) -> bool:
        with _isolated(task.target) as outcome:
            if task.kind is TaskKind.DELIVER:
                self.deliver(task.target, task.generation)
            elif task.kind is TaskKind.EXPIRE:
                self.expire(task.target, task.generation, task.lease_end)
            elif task.kind is TaskKind.CHECK:
                self.check(task.target)
        return outcome.ok

    def notice(self, paths: Iterable[str]) -> bool:
        """Link the changed streams to every subscription naming them (a stream found this
        way is linked from its beginning: it was created after the subscription's backfill
        looked), then wake the idle ones. False if that failed for any of them."""
        paths = set(paths)
        ok = True
        for subscription in self.context.store.all():
            named = [path for path in paths if names(subscription, path)]
            if named and not subscription.deleted:
                with _isolated(subscription.id) as outcome:
                    self._notice_one(subscription, named)
                ok = ok and outcome.ok
        return ok

    def _notice_one(self, subscription: Subscription, paths: list[str]) -> None:
        if self.linker.link_noticed(subscription, paths):
            # Read again after linking: a done that ended a wake before the link existed
            # looked for pending work without this stream, and the list read before it would
            # still show the wake.
            latest = self.context.store.get(subscription.id)
            if latest is None:
                return
            subscription = latest
        if is_idle(subscription, self.context.clock()):
            self.issuer.wake(subscription)

    def check(self, subscription_id: str) -> None:
        subscription = self.context.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            return
        self.linker.link_unlinked_matches(subscription)
        if is_idle(subscription, self.context.clock()):
            self.issuer.wake(subscription)

    def resume(self) -> None:
        """After a restart of a process whose timers and queued tasks died with it (the
        in-process scheduler): check every subscription once, as after its creation."""
        for subscription in self.context.store.all():
            if not subscription.deleted:
                self.context.scheduler.send(Task(TaskKind.CHECK, subscription.id))

    def sweep(self) -> None:
        """The safety net, whatever task was lost (a failed send, a failed round, a crash):
        act on leases that ran out and retries that are due, and wake idle subscriptions
        with pending work. Costs one Query, plus two reads per idle subscription."""
        now = self.context.clock()
        pending: list[float] = []  # when each wake still outstanding was issued
        for subscription in self.context.store.all():
            if not subscription.deleted and subscription.wake is not None:
                pending.append(subscription.wake.issued_at)
            with _isolated(subscription.id):
                if not subscription.deleted:
                    self._sweep_one(subscription, now)
                elif not subscription.links_dropped:
                    self.linker.drop_links(subscription)
        oldest = max(now - min(pending), 0.0) if pending else 0.0
        self.context.telemetry.count(Metric.PENDING_WAKES, len(pending))
        self.context.telemetry.count(Metric.OLDEST_PENDING_WAKE_AGE, oldest)

    def _sweep_one(self, subscription: Subscription, now: float) -> None:
        wake = subscription.wake
        if wake is None or lease_expired(wake, now):
            self.issuer.wake(subscription)  # clears an expired lease; wakes if work is pending
        elif (
            subscription.config.delivery is Delivery.WEBHOOK
            and subscription.failed_attempts
            and subscription.next_attempt_at <= now
        ):
            # Queued, not delivered here: a slow receiver must not hold up the sweep.
            task = Task(TaskKind.DELIVER, subscription.id, wake.generation)
            self.context.scheduler.send(task)

    def deliver(self, subscription_id: str, generation: int) -> None:
        """POST the current wake to the webhook, if it is still the one scheduled."""
        subscription = self.context.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            return
        wake = subscription.wake
        if wake is None or wake.generation != generation or wake.holder is not None:
            return
        if subscription.next_attempt_at > self.context.clock() + 0.05:
            return  # an early copy of a retry: its own task comes at the right time
        body = self._wake_body(subscription, wake)
        timestamp = int(self.context.clock())
        headers = {
            "Content-Type": "application/json",
            "Webhook-Signature": self.context.keys.signing.signature_header(body, timestamp),
        }
        url = subscription.config.webhook_url
        assert url is not None
        sent = self.context.post(url, body, headers, min(subscription.lease_ttl, 10.0))
        if sent.ok:
            self.context.telemetry.count(Metric.WEBHOOK_DELIVERIES)
            self._delivered(subscription, wake, sent)
        else:
            logger.info("webhook for %s failed: %s", subscription_id, sent.detail)
            self.context.telemetry.count(Metric.WEBHOOK_FAILURES)
            self._failed(subscription, wake)

    def _wake_body(self, subscription: Subscription, wake: Wake) -> bytes:
        token = self.context.keys.tokens.issue(
            WakeToken(
                subscription.id,
                wake.generation,
                wake.wake_id,
                int(self.context.clock()) + TOKEN_LIFETIME,
            )
        )
        sid = quote(subscription.id, safe="")
        document = {
            "subscription_id": subscription.id,
            "wake_id": wake.wake_id,
            "generation": wake.generation,
            "streams": [stream.report() for stream in wake.streams],
            "callback_url": f"{subscription.public_root}__ds/subscriptions/{sid}/callback",
            "callback_token": token,
        }
        return json.dumps(document).encode()

    def _delivered(self, subscription: Subscription, wake: Wake, sent: Sent) -> None:
        if sent.done:
            self.ack_snapshot(subscription, wake)
            return
        healthy = replace(subscription, failed_attempts=0, next_attempt_at=0.0)
        if subscription.failed_attempts:
            # A callback may come first; then the next failure or success resets the count.
            with contextlib.suppress(Conflict):
                healthy = self.context.store.replace(healthy, subscription.version)
        self.issuer.schedule_expiry(healthy)

    def ack_snapshot(self, subscription: Subscription, wake: Wake) -> None:
        """A webhook answered {"done": true}: ack the tails its wake announced and end the
        wake, with no read (the snapshot carries each stream's incarnation); then wake again
        if more arrived meanwhile."""
        store = self.context.store
        acks = [Ack(stream.path, stream.tail) for stream in wake.streams]
        incarnations = {stream.path: stream.incarnation for stream in wake.streams}
        current = subscription

        def attempt() -> Subscription | None:
            nonlocal current, acks
            after = replace(cleared(current), failed_attempts=0, next_attempt_at=0.0)
            try:
                return store.replace_with_acks(after, current.version, acks, incarnations)
            except Conflict:
                latest = store.get(current.id)
                if latest is None or latest.wake is None or latest.wake.wake_id != wake.wake_id:
                    return None  # acked, released or expired meanwhile
                # Still this wake: the subscription changed, a link was removed meanwhile (its
                # ack has nothing left to move), or a callback acked further (never undone).
                links = {link.path: link for link in store.links(latest)}
                acks = [ack for ack in acks if _moves(links.get(ack.path), ack, incarnations)]
                current = latest
                raise

        written = _retried_or_left(attempt, subscription.id, "the snapshot ack")
        if written is not None:
            self.issuer.wake(written)

    def _failed(self, subscription: Subscription, wake: Wake) -> None:
        """The POST of `wake` failed: deliver it again after a backoff. A write meanwhile that
        left the delivery as it was (streams added, a creation finished) has the retry written
        over it; after any other (a callback, a release, a new wake, another failure, the
        removal) the retry is not this call's to schedule."""
        store, clock = self.context.store, self.context.clock
        current = subscription

        def attempt() -> tuple[Subscription, float] | None:
            nonlocal current
            failures = current.failed_attempts + 1
            delay = retry_delay(failures)
            now = clock()
            retry = replace(
                current,
                failed_attempts=failures,
                next_attempt_at=now + delay,
                wake=replace(wake, lease_expires_at=now + delay + current.lease_ttl),
            )
            try:
                return store.replace(retry, current.version), delay
            except Conflict:
                latest = store.get(current.id)
                if latest is None or not _same_delivery_state(latest, current, wake):
                    # Acked, heartbeat, released, replaced, removed, or another failure
                    # recorded: whichever wrote it set the timer that follows from it.
                    return None
                current = latest
                raise

        # Left undone, the sweep delivers it again once the lease has run out.
        recorded = _retried_or_left(attempt, subscription.id, "recording a failure")
        if recorded is None:
            return
        written, delay = recorded
        task = Task(TaskKind.DELIVER, subscription.id, wake.generation)
        self.context.scheduler.send(task, delay)
        self.context.telemetry.count(Metric.WEBHOOK_RETRIES)
        self.issuer.schedule_expiry(written)

    def expire(self, subscription_id: str, generation: int, lease_end: float | None) -> None:
        """The timer of the lease that ends at `lease_end` (None: whatever lease is current)."""
        subscription = self.context.store.get(subscription_id)
        if subscription is None or subscription.deleted or subscription.wake is None:
            return
        wake = subscription.wake
        if wake.generation != generation:
            return
        if lease_end is not None and wake.lease_expires_at != lease_end:
            return  # the lease changed since; whatever changed it set a timer of its own
        if not lease_expired(wake, self.context.clock()):
            self.issuer.schedule_expiry(subscription)  # early (a rounded delay): look again
            return
        self.issuer.wake(subscription)  # clears the lease; a new generation if work is pending


def _retried_or_left(attempt: Callable[[], T | None], subscription_id: str, what: str) -> T | None:
    """What the worker's `attempt` wrote (None: nothing left to write); a write that keeps
    losing races is logged and left to the lease and the sweep."""
    try:
        return retry_on_conflict(attempt, attempts=DELIVERY_ATTEMPTS)
    except WriteContention:
        logger.warning("subscription %s: %s kept conflicting", subscription_id, what)
        return None


@dataclass
class _Outcome:
    ok: bool = True


@contextlib.contextmanager
def _isolated(subscription_id: str) -> Iterator[_Outcome]:
    """One subscription's failure is logged and reported (`ok`), and must not stop the round
    for the others."""
    outcome = _Outcome()
    try:
        yield outcome
    except Exception:
        outcome.ok = False
        logger.exception("subscription %s: delivery work failed", subscription_id)


def _same_delivery_state(latest: Subscription, read: Subscription, wake: Wake) -> bool:
    """Whether a write since `read` left the delivery of `wake` as it was (streams added, a
    creation finished): a failure of that delivery is still to be recorded over it."""
    return (
        not latest.deleted
        and latest.wake == wake
        and latest.failed_attempts == read.failed_attempts
        and latest.next_attempt_at == read.next_attempt_at
    )


def _moves(link: Link | None, ack: Ack, incarnations: dict[str, str | None]) -> bool:
    """Whether `ack` still moves `link`'s cursor forward (or into a new incarnation)."""
    if link is None:
        return False
    acked = offset_order(link.acked, link.acked_snapshot)
    return link.incarnation != incarnations.get(ack.path) or acked < ack.order
