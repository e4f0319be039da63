"""The control API's operations: create, describe and remove a subscription, and add or
remove its explicit streams. Each reads, decides, and writes on the version it read."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import replace
from enum import Enum

from ..storage.aws import Conflict
from ._appends import REGISTRY_MAX_AGE
from ._context import Context, after_commit
from ._linking import Linker
from ._retry import retry_on_conflict
from .config import MAX_ALL_EXPLICIT_BYTES, config_hash, explicit_bytes
from .errors import SubscriptionError, invalid
from .model import LinkStatus, Subscription, SubscriptionConfig
from .tasks import Task, TaskKind


class Creation(Enum):
    """What a create came to (the HTTP layer answers 201 and 200)."""

    CREATED = "created"
    CONFIRMED = "confirmed"  # an identical subscription existed: re-confirmed


class Control:
    """`changed_list`: told after every write that changes which streams subscriptions name
    (the append path's copy of the list is then stale)."""

    def __init__(self, context: Context, linker: Linker, changed_list: Callable[[], None]) -> None:
        self.context = context
        self.linker = linker
        self.changed_list = changed_list

    def create(
        self, subscription_id: str, config: SubscriptionConfig, public_root: str
    ) -> tuple[Creation, Subscription]:
        store = self.context.store
        wanted_hash = config_hash(config)

        def attempt() -> tuple[Creation, Subscription]:
            existing = store.get(subscription_id)
            if existing is not None and not existing.deleted:
                if existing.config_hash != wanted_hash:
                    raise SubscriptionError(
                        409,
                        "SUBSCRIPTION_ALREADY_EXISTS",
                        "a subscription with this id exists with another configuration",
                    )
                return Creation.CONFIRMED, existing
            subscription = Subscription(
                id=subscription_id,
                incarnation=secrets.token_hex(8),
                config=config,
                config_hash=wanted_hash,
                created_at=self.context.clock(),
                version=(existing.version + 1) if existing else 1,
                # Generations keep rising across a removal and re-creation: a worker that
                # remembers the last one it saw never mistakes a new wake for an old one.
                generation=existing.generation if existing else 0,
                explicit=frozenset(config.streams),
                public_root=public_root,
            )
            if existing is not None and not existing.links_dropped:
                # The tombstone's links, which nothing would find once it is replaced.
                store.drop_links(existing)
            store.insert(subscription, existing)
            return Creation.CREATED, subscription

        outcome, subscription = retry_on_conflict(attempt)
        if outcome is Creation.CONFIRMED:
            if not subscription.backfilled:  # its creation stopped short: finish it
                self._backfill(subscription)
            return outcome, subscription
        self.changed_list()
        self._backfill(subscription)
        return outcome, subscription

    def _backfill(self, subscription: Subscription) -> None:
        """Link the streams the subscription names, at their tails; then record that it did,
        and have one more look once other instances' subscription lists have expired
        (appends there were not noticed)."""
        self.linker.backfill(subscription)
        with contextlib.suppress(Conflict):  # removed meanwhile: nothing to record
            self.context.store.mark_backfilled(subscription)
        self._check_later(subscription)

    def _check_later(self, subscription: Subscription) -> None:
        task = Task(TaskKind.CHECK, subscription.id)
        after_commit(self.context.scheduler.send, task, REGISTRY_MAX_AGE + 1)

    def describe(self, subscription_id: str) -> tuple[Subscription, tuple[LinkStatus, ...]]:
        """The subscription and its links. Links whose acked position is no longer retained
        are shown at the earliest retained offset, and the move is recorded now if no write
        races it (otherwise by the next wake, which moves them all the same)."""
        subscription = self.context.existing(subscription_id)
        statuses = self.context.statuses(subscription)
        if any(status.resuming for status in statuses):
            with contextlib.suppress(Conflict):
                subscription = self.context.write(subscription, subscription.version, statuses)
        return subscription, statuses

    def remove(self, subscription_id: str) -> None:
        def attempt() -> Subscription:
            subscription = self.context.existing(subscription_id)
            now = self.context.clock()
            tombstone = replace(subscription, deleted=True, wake=None, deleted_at=now)
            return self.context.store.replace(tombstone, subscription.version)

        written = retry_on_conflict(attempt)
        self.changed_list()
        # The removal has taken effect: links left behind by a failure here are the sweep's.
        after_commit(self.linker.drop_links, written)

    def add_streams(self, subscription_id: str, paths: tuple[str, ...]) -> None:
        """Link `paths` explicitly (each new link starts at its stream's tail)."""

        def grow(explicit: frozenset[str]) -> frozenset[str]:
            grown = explicit | set(paths)
            if explicit_bytes(grown) > MAX_ALL_EXPLICIT_BYTES:
                raise invalid(f"explicit stream paths may add up to {MAX_ALL_EXPLICIT_BYTES} bytes")
            return grown

        subscription = self._change_explicit(subscription_id, grow)
        self.linker.link_explicit(subscription, paths)
        # As after a creation: instances with an older list did not notice these streams.
        self._check_later(subscription)

    def remove_stream(self, subscription_id: str, path: str) -> None:
        subscription = self._change_explicit(subscription_id, lambda explicit: explicit - {path})
        self.linker.unlink_explicit(subscription, path)

    def _change_explicit(
        self, subscription_id: str, change: Callable[[frozenset[str]], frozenset[str]]
    ) -> Subscription:
        """Write the subscription's explicit paths as `change` makes them (unless it changes
        nothing); answers the subscription as read before the write."""

        def attempt() -> tuple[Subscription, bool]:
            subscription = self.context.existing(subscription_id)
            explicit = change(subscription.explicit)
            if explicit == subscription.explicit:
                return subscription, False
            changed = replace(subscription, explicit=explicit)
            self.context.store.replace(changed, subscription.version)
            return subscription, True

        subscription, written = retry_on_conflict(attempt)
        if written:
            self.changed_list()
        return subscription
