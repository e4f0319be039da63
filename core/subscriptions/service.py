"""The subscription operations: each reads the subscription, decides with `rules`, and writes
the decision with a condition on the version it read (re-reading after a lost race).

The control API calls `create`, `describe`, `remove`, `add_streams`, `remove_stream`,
`complete` (callback and pull-wake ack), `claim` and `release`. The append path calls
`Subscriptions.changed`. The delivery worker runs `notice`, `deliver`, `expire` and `check`,
scheduled by the append path, by the operations themselves, and by retries.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..protocol.errors import ProtocolError
from ..protocol.offsets import format_offset, parse_offset
from ..storage.aws import Conflict
from ._glob import glob_matches, literal_prefix
from ._tokens import TokenSigner, WakeToken
from .config import (
    MAX_ALL_EXPLICIT_BYTES,
    config_hash,
    explicit_bytes,
    is_text,
    parse_json_object,
    parse_stream_list,
)
from .errors import SubscriptionError, invalid
from .model import (
    Ack,
    Delivery,
    Link,
    LinkStatus,
    StreamTail,
    Subscription,
    SubscriptionConfig,
    Wake,
)
from .rules import (
    ClaimKind,
    check_acks,
    check_current,
    claimed,
    cleared,
    decide_claim,
    extended,
    is_idle,
    lease_expired,
    link_statuses,
    new_wake,
    parse_acks,
    retry_delay,
)
from .store import SubscriptionStore
from .tasks import Scheduler, Task, TaskKind

if TYPE_CHECKING:  # cryptography loads with the keys, on first use: not on a cold start
    from ._signing import SigningKey

logger = logging.getLogger("dsaws.subscriptions")
# Callback and claim tokens outlive any lease; the generation and wake fence them sooner.
TOKEN_LIFETIME = 24 * 3600
# How long the append path trusts its copy of the subscription list. A subscription made
# elsewhere within this window is caught by the CHECK task its creation schedules after it.
REGISTRY_MAX_AGE = 2.0
# Longer than any request or task can run (a Lambda invocation lasts 15 minutes at most): a
# backfill or a notice that read the subscription before its removal may still be writing
# links this long after it, so a tombstone's links are dropped again until then.
LINK_WRITERS_GRACE = 900.0
_LIST_PAGE = 200
# Tries of a write that keeps losing races before leaving it to the lease and the sweep.
_ATTEMPTS = 10
# Links this process has made or seen (a notice skips writing them again), the most recent.
_KNOWN_LINKS = 100_000


class CreateResult:
    CREATED = 201
    CONFIRMED = 200


@dataclass(frozen=True)
class Keys:
    """The webhook signing key (public half in the JWKS) and the token key, from one secret."""

    signing: SigningKey
    tokens: TokenSigner


@dataclass(frozen=True)
class Sent:
    """What a webhook POST came to: `done` when it answered {"done": true}."""

    ok: bool
    done: bool = False
    detail: str = ""


WebhookPost = Callable[[str, bytes, dict[str, str], float], Sent]


class Subscriptions:
    def __init__(
        self,
        store: SubscriptionStore,
        streams: Any,  # the stream store: listing for backfill, appends of wake events
        keys: Callable[[], Keys],
        scheduler: Scheduler,
        post: WebhookPost,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.streams = streams
        self._keys = keys
        self.scheduler = scheduler
        self.post = post
        self.clock = clock
        self._registry: list[Subscription] = []
        self._registry_read_at = float("-inf")
        self._known_links = _RecentKeys(_KNOWN_LINKS)

    @property
    def keys(self) -> Keys:
        return self._keys()

    # ================================================================ control API

    def create(
        self, subscription_id: str, config: SubscriptionConfig, public_root: str
    ) -> tuple[int, Subscription]:
        wanted_hash = config_hash(config)
        while True:
            existing = self.store.get(subscription_id)
            if existing is not None and not existing.deleted:
                if existing.config_hash != wanted_hash:
                    raise SubscriptionError(
                        409,
                        "SUBSCRIPTION_ALREADY_EXISTS",
                        "a subscription with this id exists with another configuration",
                    )
                if not existing.backfilled:  # its creation stopped short: finish it
                    self._backfill(existing)
                return CreateResult.CONFIRMED, existing
            subscription = Subscription(
                id=subscription_id,
                incarnation=secrets.token_hex(8),
                config=config,
                config_hash=wanted_hash,
                created_at=self.clock(),
                version=(existing.version + 1) if existing else 1,
                # Generations keep rising across a removal and re-creation: a worker that
                # remembers the last one it saw never mistakes a new wake for an old one.
                generation=existing.generation if existing else 0,
                explicit=frozenset(config.streams),
                public_root=public_root,
            )
            if existing is not None and not existing.links_dropped:
                # The tombstone's links, which nothing would find once it is replaced.
                self.store.drop_links(existing)
            try:
                self.store.insert(subscription, existing)
            except Conflict:
                continue
            break
        self._forget_registry()
        self._backfill(subscription)
        return CreateResult.CREATED, subscription

    def _backfill(self, subscription: Subscription) -> None:
        """Link the existing streams the subscription names at their current tails, so that
        it starts from now rather than replaying history; then record that it did, and have
        one more look once other instances' subscription lists have expired (appends there
        were not noticed)."""
        pattern = subscription.config.pattern
        if pattern is not None:
            for path in self._streams_matching(pattern):
                tail = self.store.tails([path]).get(path)
                if tail is not None:
                    explicit = path in subscription.explicit
                    self.store.link(subscription, path, glob=True, explicit=explicit, at=tail)
        self._link_explicit(subscription, subscription.explicit)
        with contextlib.suppress(Conflict):  # removed meanwhile: nothing to record
            self.store.mark_backfilled(subscription)
        self._after_commit(
            self.scheduler.send, Task(TaskKind.CHECK, subscription.id), REGISTRY_MAX_AGE + 1
        )

    def _link_explicit(self, subscription: Subscription, paths: Iterable[str]) -> None:
        paths = list(paths)
        tails = self.store.tails(paths)
        for path in paths:
            at = tails.get(path, StreamTail(None, 0))
            self.store.link(
                subscription, path, glob=_matches(subscription, path), explicit=True, at=at
            )

    def _streams_matching(self, pattern: str) -> list[str]:
        prefix, cursor, found = literal_prefix(pattern), None, []
        while True:
            page = self.streams.list_streams(prefix, cursor, _LIST_PAGE)
            found.extend(path for path in page.paths if glob_matches(pattern, path))
            cursor = page.cursor
            if cursor is None:
                return found

    def describe(self, subscription_id: str) -> tuple[Subscription, tuple[LinkStatus, ...]]:
        subscription = self._existing(subscription_id)
        return subscription, self._statuses(subscription)

    def remove(self, subscription_id: str) -> None:
        while True:
            subscription = self._existing(subscription_id)
            try:
                tombstone = replace(subscription, deleted=True, wake=None, deleted_at=self.clock())
                written = self.store.replace(tombstone, subscription.version)
            except Conflict:
                continue
            break
        self._forget_registry()
        # The removal has taken effect: links left behind by a failure here are the sweep's.
        self._after_commit(self._drop_links, written)

    def _drop_links(self, tombstone: Subscription) -> None:
        """Delete a removed subscription's link items; once no writer that read it before
        its removal can still be adding links, record on the tombstone that they are gone
        for good (until then the sweep drops them again)."""
        self.store.drop_links(tombstone)
        if self.clock() - tombstone.deleted_at <= LINK_WRITERS_GRACE:
            return
        with contextlib.suppress(Conflict):  # re-created meanwhile: its links are its own
            self.store.replace(replace(tombstone, links_dropped=True), tombstone.version)

    def add_streams(self, subscription_id: str, body: bytes) -> None:
        paths = _stream_list(body)

        def grow(explicit: frozenset[str]) -> frozenset[str]:
            grown = explicit | set(paths)
            if explicit_bytes(grown) > MAX_ALL_EXPLICIT_BYTES:
                raise invalid(f"explicit stream paths may add up to {MAX_ALL_EXPLICIT_BYTES} bytes")
            return grown

        subscription = self._change_explicit(subscription_id, grow)
        self._link_explicit(subscription, paths)
        # As after a creation: instances with an older list did not notice these streams.
        self._after_commit(
            self.scheduler.send, Task(TaskKind.CHECK, subscription.id), REGISTRY_MAX_AGE + 1
        )

    def remove_stream(self, subscription_id: str, path: str) -> None:
        subscription = self._change_explicit(subscription_id, lambda explicit: explicit - {path})
        self._known_links.discard((subscription.incarnation, path))
        with contextlib.suppress(Conflict):  # no link was left to unmark
            self.store.unlink_explicit(subscription, path, keep=_matches(subscription, path))

    def _change_explicit(
        self, subscription_id: str, change: Callable[[frozenset[str]], frozenset[str]]
    ) -> Subscription:
        """Write the subscription's explicit paths as `change` makes them (unless it changes
        nothing), re-reading after a lost race."""
        while True:
            subscription = self._existing(subscription_id)
            explicit = change(subscription.explicit)
            if explicit == subscription.explicit:
                return subscription
            try:
                self.store.replace(replace(subscription, explicit=explicit), subscription.version)
            except Conflict:
                continue
            self._forget_registry()
            return subscription

    def _existing(self, subscription_id: str) -> Subscription:
        subscription = self.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            raise SubscriptionError(404, "SUBSCRIPTION_NOT_FOUND", "no such subscription")
        return subscription

    def _after_commit(self, action: Callable[..., object], *args: Any) -> None:
        """Follow-up work of a request whose write is committed (queueing a task, waking
        again): a failure is logged and left to the sweep, never answered as an error, since
        the client would retry a request that has already taken effect."""
        try:
            action(*args)
        except Exception:
            logger.exception("follow-up of a committed subscription write failed")

    # ================================================================ noticing appends

    def changed(self, path: str) -> None:
        """Called after a write that moved `path`'s tail: schedules a NOTICE when any
        subscription could link it. Reads the subscription list at most every
        REGISTRY_MAX_AGE seconds, and only while writes happen: nothing at rest."""
        if any(_names(subscription, path) for subscription in self._live_registry()):
            self.scheduler.send(Task(TaskKind.NOTICE, path))

    def unconcerned(self, path: str) -> bool:
        """Whether no subscription can name `path`, known without any I/O: the list read
        within REGISTRY_MAX_AGE names none. False when `changed` must run (it may read the
        list, or queue a notice), which the caller then does off its event loop."""
        if time.monotonic() - self._registry_read_at > REGISTRY_MAX_AGE:
            return False
        return not any(_names(subscription, path) for subscription in self._registry)

    def _live_registry(self) -> list[Subscription]:
        now = time.monotonic()
        if now - self._registry_read_at > REGISTRY_MAX_AGE:
            self._registry = [s for s in self.store.all() if not s.deleted]
            self._registry_read_at = now
        return self._registry

    def _forget_registry(self) -> None:
        self._registry_read_at = float("-inf")

    # ================================================================ delivery worker

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
        for subscription in self.store.all():
            named = [path for path in paths if _names(subscription, path)]
            if named and not subscription.deleted:
                with _isolated(subscription.id) as outcome:
                    self._notice_one(subscription, named)
                ok = ok and outcome.ok
        return ok

    def _notice_one(self, subscription: Subscription, paths: list[str]) -> None:
        linked = False
        for path in paths:
            key = (subscription.incarnation, path)
            if key not in self._known_links:
                glob, explicit = _matches(subscription, path), path in subscription.explicit
                self.store.link(subscription, path, glob=glob, explicit=explicit, at=None)
                self._known_links.add(key)
                linked = True
        if linked:
            # Read again after linking: a done that ended a wake before the link existed
            # looked for pending work without this stream, and the list read before it would
            # still show the wake.
            latest = self.store.get(subscription.id)
            if latest is None:
                return
            subscription = latest
        if is_idle(subscription, self.clock()):
            self._wake(subscription)

    def check(self, subscription_id: str) -> None:
        subscription = self.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            return
        if subscription.config.pattern is not None:
            linked = {link.path for link in self.store.links(subscription)}
            for path in self._streams_matching(subscription.config.pattern):
                if path not in linked:
                    explicit = path in subscription.explicit
                    self.store.link(subscription, path, glob=True, explicit=explicit, at=None)
        if is_idle(subscription, self.clock()):
            self._wake(subscription)

    def resume(self) -> None:
        """After a restart of a process whose timers and queued tasks died with it (the
        in-process scheduler): check every subscription once, as after its creation."""
        for subscription in self.store.all():
            if not subscription.deleted:
                self.scheduler.send(Task(TaskKind.CHECK, subscription.id))

    def sweep(self) -> None:
        """The safety net, whatever task was lost (a failed send, a failed round, a crash):
        act on leases that ran out and retries that are due, and wake idle subscriptions
        with pending work. Costs one Query, plus two reads per idle subscription."""
        now = self.clock()
        for subscription in self.store.all():
            with _isolated(subscription.id):
                if not subscription.deleted:
                    self._sweep_one(subscription, now)
                elif not subscription.links_dropped:
                    self._drop_links(subscription)

    def _sweep_one(self, subscription: Subscription, now: float) -> None:
        wake = subscription.wake
        if wake is None or lease_expired(wake, now):
            self._wake(subscription)  # clears an expired lease; wakes if work is pending
        elif (
            subscription.config.delivery is Delivery.WEBHOOK
            and subscription.failed_attempts
            and subscription.next_attempt_at <= now
        ):
            # Queued, not delivered here: a slow receiver must not hold up the sweep.
            self.scheduler.send(Task(TaskKind.DELIVER, subscription.id, wake.generation))

    def _wake(self, subscription: Subscription) -> bool:
        """Issue a wake if the subscription is idle and has pending work; True if issued."""
        while True:
            now = self.clock()
            if subscription.deleted or not is_idle(subscription, now):
                return False
            statuses = self._statuses(subscription)
            if not any(status.has_pending for status in statuses):
                if subscription.wake is not None:  # an expired lease: clear it
                    with contextlib.suppress(Conflict):
                        self.store.replace(cleared(subscription), subscription.version)
                return False
            woken = new_wake(subscription, statuses, now, holder=None)
            delay = max(0.0, subscription.next_attempt_at - now)
            if woken.wake is not None and woken.wake.lease_expires_at is not None:
                # A webhook whose delivery waits for its backoff is leased from the send.
                wake = replace(woken.wake, lease_expires_at=woken.wake.lease_expires_at + delay)
                woken = replace(woken, wake=wake)
            try:
                written = self.store.replace(woken, subscription.version)
            except Conflict:
                latest = self.store.get(subscription.id)
                if latest is None:
                    return False
                subscription = latest
                continue
            self._dispatch(written, statuses, delay)
            return True

    def _dispatch(
        self, subscription: Subscription, statuses: Sequence[LinkStatus], delay: float
    ) -> None:
        wake = subscription.wake
        assert wake is not None
        if subscription.config.delivery is Delivery.WEBHOOK:
            # The lease's timer is set by the delivery: a wake acked by its answer needs none
            # (and a delivery that never ran is found by the sweep).
            self.scheduler.send(Task(TaskKind.DELIVER, subscription.id, wake.generation), delay)
        else:
            # The timer first: a wake event that cannot be written (the store is busy) must
            # not leave the wake without one. Unclaimed by then, it is announced again.
            self._schedule_expiry(subscription)
            self._write_wake_event(subscription, wake, statuses)

    def _schedule_expiry(self, subscription: Subscription) -> None:
        wake = subscription.wake
        if wake is not None and wake.lease_expires_at is not None:
            delay = max(0.0, wake.lease_expires_at - self.clock())
            expiry = Task(TaskKind.EXPIRE, subscription.id, wake.generation, wake.lease_expires_at)
            self.scheduler.send(expiry, delay)

    def _write_wake_event(
        self, subscription: Subscription, wake: Wake, statuses: Sequence[LinkStatus]
    ) -> None:
        stream = wake.streams[0].path if wake.streams else None
        event = {
            "type": "wake",
            "subscription_id": subscription.id,
            "stream": stream,
            "generation": wake.generation,
            "ts": int(self.clock() * 1000),
        }
        wake_stream = subscription.config.wake_stream
        assert wake_stream is not None
        if not self.streams.append_json(wake_stream, event):
            # No wake stream to write to: the wake stays in flight for a claim to take.
            logger.warning(
                "subscription %s: wake stream %s is missing or closed", subscription.id, wake_stream
            )

    def deliver(self, subscription_id: str, generation: int) -> None:
        """POST the current wake to the webhook, if it is still the one scheduled."""
        subscription = self.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            return
        wake = subscription.wake
        if wake is None or wake.generation != generation or wake.holder is not None:
            return
        if subscription.next_attempt_at > self.clock() + 0.05:
            return  # an early copy of a retry: its own task comes at the right time
        body = self._wake_body(subscription, wake)
        timestamp = int(self.clock())
        headers = {
            "Content-Type": "application/json",
            "Webhook-Signature": self.keys.signing.signature_header(body, timestamp),
        }
        url = subscription.config.webhook_url
        assert url is not None
        sent = self.post(url, body, headers, min(subscription.lease_ttl, 10.0))
        if sent.ok:
            self._delivered(subscription, wake, sent)
        else:
            logger.info("webhook for %s failed: %s", subscription_id, sent.detail)
            self._failed(subscription, wake)

    def _wake_body(self, subscription: Subscription, wake: Wake) -> bytes:
        token = self.keys.tokens.issue(
            WakeToken(
                subscription.id,
                wake.generation,
                wake.wake_id,
                int(self.clock()) + TOKEN_LIFETIME,
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
            self._ack_snapshot(subscription, wake)
            return
        healthy = replace(subscription, failed_attempts=0, next_attempt_at=0.0)
        if subscription.failed_attempts:
            # A callback may come first; then the next failure or success resets the count.
            with contextlib.suppress(Conflict):
                healthy = self.store.replace(healthy, subscription.version)
        self._schedule_expiry(healthy)

    def _ack_snapshot(self, subscription: Subscription, wake: Wake) -> None:
        """A webhook answered {"done": true}: ack the tails its wake announced and end the
        wake, with no read (the snapshot carries each stream's incarnation); then wake again
        if more arrived meanwhile."""
        acks = [Ack(stream.path, stream.tail) for stream in wake.streams]
        incarnations = {stream.path: stream.incarnation for stream in wake.streams}
        for _ in range(_ATTEMPTS):
            after = replace(cleared(subscription), failed_attempts=0, next_attempt_at=0.0)
            try:
                written = self.store.replace_with_acks(
                    after, subscription.version, acks, incarnations
                )
            except Conflict:
                latest = self.store.get(subscription.id)
                if latest is None or latest.wake is None or latest.wake.wake_id != wake.wake_id:
                    return  # acked, released or expired meanwhile
                # Still this wake: the subscription changed, a link was removed meanwhile (its
                # ack has nothing left to move), or a callback acked further (never undone).
                links = {link.path: link for link in self.store.links(latest)}
                acks = [ack for ack in acks if _moves(links.get(ack.path), ack, incarnations)]
                subscription = latest
                continue
            self._wake(written)
            return
        logger.warning("subscription %s: the snapshot ack kept conflicting", subscription.id)

    def _failed(self, subscription: Subscription, wake: Wake) -> None:
        """The POST of `wake` failed: deliver it again after a backoff. A write meanwhile that
        left the delivery as it was (streams added, a creation finished) has the retry written
        over it; after any other (a callback, a release, a new wake, another failure, the
        removal) the retry is not this call's to schedule."""
        for _ in range(_ATTEMPTS):
            failures = subscription.failed_attempts + 1
            delay = retry_delay(failures)
            now = self.clock()
            retry = replace(
                subscription,
                failed_attempts=failures,
                next_attempt_at=now + delay,
                wake=replace(wake, lease_expires_at=now + delay + subscription.lease_ttl),
            )
            try:
                written = self.store.replace(retry, subscription.version)
            except Conflict:
                latest = self.store.get(subscription.id)
                if latest is None or not _same_delivery_state(latest, subscription, wake):
                    # Acked, heartbeat, released, replaced, removed, or another failure
                    # recorded: whichever wrote it set the timer that follows from it.
                    return
                subscription = latest
                continue
            self.scheduler.send(Task(TaskKind.DELIVER, subscription.id, wake.generation), delay)
            self._schedule_expiry(written)
            return
        # The sweep delivers it again once the lease has run out.
        logger.warning("subscription %s: recording a failure kept conflicting", subscription.id)

    def expire(self, subscription_id: str, generation: int, lease_end: float | None) -> None:
        """The timer of the lease that ends at `lease_end` (None: whatever lease is current)."""
        subscription = self.store.get(subscription_id)
        if subscription is None or subscription.deleted or subscription.wake is None:
            return
        wake = subscription.wake
        if wake.generation != generation:
            return
        if lease_end is not None and wake.lease_expires_at != lease_end:
            return  # the lease changed since; whatever changed it set a timer of its own
        if not lease_expired(wake, self.clock()):
            self._schedule_expiry(subscription)  # early (a rounded delay): look again
            return
        self._wake(subscription)  # clears the lease; a new generation if work is pending

    # ================================================================ callbacks, claims

    def complete(
        self,
        subscription_id: str,
        authorization: str | None,
        body: bytes,
        delivery: Delivery | None = None,
    ) -> bool:
        """A webhook callback or a pull-wake ack: apply the acks, and with `done` end the
        wake (waking again if work remains, the answer's `next_wake`); without it, extend
        the lease (a heartbeat)."""
        request = parse_json_object(body)
        generation, wake_id = request.get("generation"), request.get("wake_id")
        self._authorize(subscription_id, authorization, generation, wake_id)
        done = request.get("done", False)
        if not isinstance(done, bool):
            raise invalid("done must be true or false")
        acks = [Ack(path, *_position(offset)) for path, offset in parse_acks(request.get("acks"))]
        return self._complete(
            subscription_id, generation, wake_id, acks, done=done, delivery=delivery
        )

    def _complete(
        self,
        subscription_id: str,
        generation: object,
        wake_id: object,
        acks: Sequence[Ack],
        *,
        done: bool,
        delivery: Delivery | None = None,
    ) -> bool:
        if len(acks) > 99:
            raise invalid("at most 99 acks per request")
        while True:
            subscription = self._fenced_subscription(subscription_id, delivery)
            wake = check_current(subscription, generation, wake_id, self.clock())
            links = self.store.links(subscription)
            tails = self.store.tails(link.path for link in links)
            statuses = link_statuses(links, tails)
            forward = check_acks(acks, statuses, wake.streams)
            after = cleared(subscription) if done else extended(subscription, self.clock())
            # A valid callback shows the receiver has the wake: no failure stands any more.
            after = replace(after, failed_attempts=0, next_attempt_at=0.0)
            try:
                incarnations = {path: tail.incarnation for path, tail in tails.items()}
                written = self.store.replace_with_acks(
                    after, subscription.version, forward, incarnations
                )
            except Conflict:
                continue
            break
        if not done:
            self._after_commit(self._schedule_expiry, written)
            return False
        # Looked at afresh, not from the tails read before the write: an append noticed while
        # this wake was in flight found the subscription busy, and only this look wakes it.
        try:
            return self._wake(written)
        except Exception:  # the acks are committed: the sweep wakes what this could not
            logger.exception("subscription %s: waking again after a done failed", written.id)
            return False

    def claim(self, subscription_id: str, body: bytes) -> tuple[Subscription, str, tuple]:
        request = parse_json_object(body)
        worker = request.get("worker")
        if not isinstance(worker, str) or not 0 < len(worker) <= 256 or not is_text(worker):
            raise invalid("worker must be a name of 1 to 256 characters")
        while True:
            subscription = self._existing(subscription_id)
            if subscription.config.delivery is not Delivery.PULL_WAKE:
                raise invalid("only pull-wake subscriptions are claimed")
            now = self.clock()
            decision = decide_claim(subscription, now)
            if decision.kind is ClaimKind.BUSY:
                assert subscription.wake is not None
                raise SubscriptionError(
                    409,
                    "ALREADY_CLAIMED",
                    "another worker holds this subscription's lease",
                    {"current_holder": decision.holder, "generation": subscription.wake.generation},
                )
            statuses = self._statuses(subscription)
            if decision.kind is ClaimKind.NEW:
                if not any(status.has_pending for status in statuses):
                    raise SubscriptionError(409, "NO_PENDING_WORK", "nothing to claim")
                after = new_wake(subscription, statuses, now, holder=worker)
            else:
                pending = new_wake(subscription, statuses, now, holder=worker).wake
                assert pending is not None
                after = claimed(subscription, worker, now)
                assert after.wake is not None
                after = replace(after, wake=replace(after.wake, streams=pending.streams))
            try:
                written = self.store.replace(after, subscription.version)
            except Conflict:
                continue
            break
        self._after_commit(self._schedule_expiry, written)
        wake = written.wake
        assert wake is not None
        token = self.keys.tokens.issue(
            WakeToken(written.id, wake.generation, wake.wake_id, int(now) + TOKEN_LIFETIME)
        )
        return written, token, tuple(stream.report() for stream in wake.streams)

    def release(self, subscription_id: str, authorization: str | None, body: bytes) -> None:
        request = parse_json_object(body)
        generation, wake_id = request.get("generation"), request.get("wake_id")
        self._authorize(subscription_id, authorization, generation, wake_id)
        while True:
            subscription = self._fenced_subscription(subscription_id, Delivery.PULL_WAKE)
            check_current(subscription, generation, wake_id, self.clock())
            try:
                written = self.store.replace(cleared(subscription), subscription.version)
            except Conflict:
                continue
            break
        self._after_commit(self._wake, written)

    def _authorize(
        self, subscription_id: str, authorization: str | None, generation: object, wake_id: object
    ) -> None:
        scheme, _, text = (authorization or "").partition(" ")
        token = (
            self.keys.tokens.verify(text.strip(), now=self.clock())
            if scheme.lower() == "bearer"
            else None
        )
        if token is None or token.subscription_id != subscription_id:
            raise SubscriptionError(401, "UNAUTHORIZED", "a valid wake token is required")
        if token.generation != generation or token.wake_id != wake_id:
            raise SubscriptionError(409, "FENCED", "this wake is no longer current")

    def _fenced_subscription(
        self, subscription_id: str, delivery: Delivery | None = None
    ) -> Subscription:
        """The subscription a wake request names; once removed, its wakes are all fenced. A
        webhook's wakes are acked at /callback, a pull-wake's at /ack and /release
        (`delivery`: the kind the endpoint serves)."""
        subscription = self.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            raise SubscriptionError(409, "FENCED", "the subscription was removed")
        if delivery is not None and subscription.config.delivery is not delivery:
            raise invalid(f"this endpoint is for {delivery.value} subscriptions")
        return subscription

    def _statuses(self, subscription: Subscription) -> tuple[LinkStatus, ...]:
        links = self.store.links(subscription)
        return link_statuses(links, self.store.tails(link.path for link in links))


# ---------------------------------------------------------------- helpers


class _RecentKeys:
    """A set that keeps its most recently added keys, up to a bound, for any thread."""

    def __init__(self, bound: int) -> None:
        self._keys: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._bound = bound
        self._lock = threading.Lock()

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._keys

    def add(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._keys[key] = None
            self._keys.move_to_end(key)
            while len(self._keys) > self._bound:
                self._keys.popitem(last=False)

    def discard(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._keys.pop(key, None)


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
    return link.incarnation != incarnations.get(ack.path) or link.acked < ack.position


def _matches(subscription: Subscription, path: str) -> bool:
    """Whether the subscription's pattern names `path`."""
    pattern = subscription.config.pattern
    return pattern is not None and glob_matches(pattern, path)


def _names(subscription: Subscription, path: str) -> bool:
    """Whether the subscription names `path`, by its pattern or explicitly."""
    return path in subscription.explicit or _matches(subscription, path)


def _stream_list(body: bytes) -> tuple[str, ...]:
    document = parse_json_object(body)
    if set(document) != {"streams"}:
        raise invalid('the body must be {"streams": [paths]}')
    return parse_stream_list(document["streams"])


def _position(offset: str) -> tuple[int, bool]:
    """The byte position an acked offset names, and whether it names it exactly (`_i`)."""
    try:
        parsed = parse_offset(offset)
    except ProtocolError as exc:
        raise invalid(exc.message) from exc
    return parsed.at, parsed.exact


def stream_report(status: LinkStatus) -> dict[str, Any]:
    """A linked stream as GET describes it."""
    return {
        "path": status.link.path,
        "link_type": status.link.link_type.value,
        "acked_offset": format_offset(status.acked, status.acked_exact),
    }


__all__ = ["CreateResult", "Keys", "Link", "Sent", "Subscriptions"]
