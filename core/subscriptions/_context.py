"""What every part of the subscription service shares: its store, ports and clock, and the
few reads and rules more than one part makes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..telemetry import NoTelemetry, Telemetry
from ._glob import glob_matches, literal_prefix
from .errors import SubscriptionError
from .model import LinkStatus, Subscription
from .ports import Keys, StreamPort, WebhookPost
from .rules import link_statuses, resumes
from .store import SubscriptionStore
from .tasks import Scheduler

logger = logging.getLogger("dsaws.subscriptions")
_LIST_PAGE = 200
# Callback and claim tokens outlive any lease; the generation and wake fence them sooner.
TOKEN_LIFETIME = 24 * 3600


@dataclass(frozen=True)
class Context:
    """The service's dependencies. The parts hold this one object, so a store or scheduler
    patched on it (tests, the benchmarks' counters) is patched for all of them."""

    store: SubscriptionStore
    streams: StreamPort
    load_keys: Callable[[], Keys]
    scheduler: Scheduler
    post: WebhookPost
    clock: Callable[[], float]
    telemetry: Telemetry = field(default_factory=NoTelemetry)

    @property
    def keys(self) -> Keys:
        return self.load_keys()

    def existing(self, subscription_id: str) -> Subscription:
        """The live subscription; 404 SUBSCRIPTION_NOT_FOUND if there is none (or a tombstone)."""
        subscription = self.store.get(subscription_id)
        if subscription is None or subscription.deleted:
            raise SubscriptionError(404, "SUBSCRIPTION_NOT_FOUND", "no such subscription")
        return subscription

    def statuses(self, subscription: Subscription) -> tuple[LinkStatus, ...]:
        """Each link against its stream, those whose acked position is no longer retained
        already at the stream's earliest retained offset (the move `write` records)."""
        links = self.store.links(subscription)
        tails = self.store.tails(link.path for link in links)
        return link_statuses(links, tails, self.clock())

    def write(
        self, subscription: Subscription, read_version: int, statuses: Sequence[LinkStatus]
    ) -> Subscription:
        """Write `subscription` over the version read (Conflict if anyone wrote since), and in
        the same transaction record the moves up to the earliest retained offset that
        `statuses` decided."""
        moves = resumes(statuses)
        if not moves:
            return self.store.replace(subscription, read_version)
        incarnations = {status.link.path: status.incarnation for status in statuses}
        written = self.store.replace_with_acks(subscription, read_version, moves, incarnations)
        for move in moves:
            assert move.skipped is not None
            logger.info(
                "subscription %s: %s resumes at %s, the earliest retained offset (acked %s)",
                subscription.id,
                move.path,
                move.skipped.to_offset,
                move.skipped.from_offset,
            )
        return written

    def streams_matching(self, pattern: str) -> list[str]:
        """Every existing stream the pattern names, listed from its literal prefix."""
        prefix, cursor, found = literal_prefix(pattern), None, []
        while True:
            page = self.streams.list_streams(prefix, cursor, _LIST_PAGE)
            found.extend(path for path in page.paths if glob_matches(pattern, path))
            cursor = page.cursor
            if cursor is None:
                return found


def after_commit(action: Callable[..., object], *args: Any) -> None:
    """Follow-up work of a request whose write is committed (queueing a task, waking
    again): a failure is logged and left to the sweep, never answered as an error, since
    the client would retry a request that has already taken effect."""
    try:
        action(*args)
    except Exception:
        logger.exception("follow-up of a committed subscription write failed")


def matches(subscription: Subscription, path: str) -> bool:
    """Whether the subscription's pattern names `path`."""
    pattern = subscription.config.pattern
    return pattern is not None and glob_matches(pattern, path)


def names(subscription: Subscription, path: str) -> bool:
    """Whether the subscription names `path`, by its pattern or explicitly."""
    return path in subscription.explicit or matches(subscription, path)
