"""The wake requests: a webhook's callback and a pull-wake's ack (`complete`), a pull-wake's
claim and release. Each names a wake, and all but the claim carry that wake's token."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from ._context import TOKEN_LIFETIME, Context, after_commit
from ._issuing import WakeIssuer
from ._retry import retry_on_conflict
from ._tokens import WakeToken
from .errors import SubscriptionError, invalid
from .model import Completion, Delivery, Subscription, WakeFence, WakeStream
from .rules import (
    ClaimKind,
    check_acks,
    check_current,
    claimed,
    cleared,
    decide_claim,
    extended,
    fenced,
    link_statuses,
    new_wake,
)

logger = logging.getLogger("dsaws.subscriptions")


@dataclass(frozen=True)
class AuthorizedWake:
    """A wake request whose token names this subscription and the wake the request names:
    what `authorize` answers, and what `complete` and `release` act on."""

    subscription_id: str
    fence: WakeFence


@dataclass(frozen=True)
class Claim:
    """A won claim: the subscription as written (its wake held by the worker), the wake's
    token, and the pending streams it announces."""

    subscription: Subscription
    token: str
    streams: tuple[WakeStream, ...]


class WakeRequests:
    def __init__(self, context: Context, issuer: WakeIssuer) -> None:
        self.context = context
        self.issuer = issuer

    def authorize(
        self, subscription_id: str, token: str | None, fence: WakeFence
    ) -> AuthorizedWake:
        """401 UNAUTHORIZED unless `token` is a valid wake token of this subscription; 409
        FENCED unless it is the token of the wake `fence` names."""
        verified = (
            self.context.keys.tokens.verify(token, now=self.context.clock())
            if token is not None
            else None
        )
        if verified is None or verified.subscription_id != subscription_id:
            raise SubscriptionError(401, "UNAUTHORIZED", "a valid wake token is required")
        if verified.generation != fence.generation or verified.wake_id != fence.wake_id:
            raise fenced()
        return AuthorizedWake(subscription_id, fence)

    def complete(
        self, wake: AuthorizedWake, completion: Completion, delivery: Delivery | None = None
    ) -> bool:
        """A webhook callback or a pull-wake ack: apply the acks, and with `done` end the
        wake (waking again if work remains, the answer's `next_wake`); without it, extend
        the lease (a heartbeat)."""
        store, clock, fence = self.context.store, self.context.clock, wake.fence

        def attempt() -> Subscription:
            subscription = self._fenced_subscription(wake.subscription_id, delivery)
            current = check_current(subscription, fence.generation, fence.wake_id, clock())
            links = store.links(subscription)
            tails = store.tails(link.path for link in links)
            statuses = link_statuses(links, tails, clock())
            forward = check_acks(completion.acks, statuses, current.streams)
            after = cleared(subscription) if completion.done else extended(subscription, clock())
            # A valid callback shows the receiver has the wake: no failure stands any more.
            after = replace(after, failed_attempts=0, next_attempt_at=0.0)
            incarnations = {path: tail.incarnation for path, tail in tails.items()}
            return store.replace_with_acks(after, subscription.version, forward, incarnations)

        written = retry_on_conflict(attempt)
        if not completion.done:
            after_commit(self.issuer.schedule_expiry, written)
            return False
        # Looked at afresh, not from the tails read before the write: an append noticed while
        # this wake was in flight found the subscription busy, and only this look wakes it.
        try:
            return self.issuer.wake(written)
        except Exception:  # the acks are committed: the sweep wakes what this could not
            logger.exception("subscription %s: waking again after a done failed", written.id)
            return False

    def claim(self, subscription_id: str, worker: str) -> Claim:
        """Hand `worker` the subscription's wake (a new one if none is usable): 409
        ALREADY_CLAIMED while another worker's lease runs, NO_PENDING_WORK with nothing to do."""
        now = 0.0

        def attempt() -> Subscription:
            nonlocal now
            subscription = self.context.existing(subscription_id)
            if subscription.config.delivery is not Delivery.PULL_WAKE:
                raise invalid("only pull-wake subscriptions are claimed")
            now = self.context.clock()
            decision = decide_claim(subscription, now)
            if decision.kind is ClaimKind.BUSY:
                assert subscription.wake is not None
                raise SubscriptionError(
                    409,
                    "ALREADY_CLAIMED",
                    "another worker holds this subscription's lease",
                    {"current_holder": decision.holder, "generation": subscription.wake.generation},
                )
            statuses = self.context.statuses(subscription)
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
            return self.context.write(after, subscription.version, statuses)

        written = retry_on_conflict(attempt)
        after_commit(self.issuer.schedule_expiry, written)
        wake = written.wake
        assert wake is not None
        token = self.context.keys.tokens.issue(
            WakeToken(written.id, wake.generation, wake.wake_id, int(now) + TOKEN_LIFETIME)
        )
        return Claim(written, token, wake.streams)

    def release(self, wake: AuthorizedWake) -> None:
        """A pull-wake's worker hands its wake back: it ends, and a new one is issued if work
        is pending."""
        fence = wake.fence

        def attempt() -> Subscription:
            subscription = self._fenced_subscription(wake.subscription_id, Delivery.PULL_WAKE)
            check_current(subscription, fence.generation, fence.wake_id, self.context.clock())
            return self.context.store.replace(cleared(subscription), subscription.version)

        written = retry_on_conflict(attempt)
        after_commit(self.issuer.wake, written)

    def _fenced_subscription(
        self, subscription_id: str, delivery: Delivery | None = None
    ) -> Subscription:
        """The subscription a wake request names; once removed, its wakes are all fenced. A
        webhook's wakes are acked at /callback, a pull-wake's at /ack and /release
        (`delivery`: the kind the endpoint serves)."""
        subscription = self.context.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            raise SubscriptionError(409, "FENCED", "the subscription was removed")
        if delivery is not None and subscription.config.delivery is not delivery:
            raise invalid(f"this endpoint is for {delivery.value} subscriptions")
        return subscription
