"""What every part of the subscription service shares: its store, ports and clock, and the
few reads and rules more than one part makes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..telemetry import NoTelemetry, Telemetry
from ._glob import glob_matches, literal_prefix
from .errors import SubscriptionError
from .model import LinkStatus, Subscription
from .ports import Keys, StreamPort, WebhookPost
from .rules import link_statuses
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
        links = self.store.links(subscription)
        return link_statuses(links, self.store.tails(link.path for link in links))

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
