"""The append path's side: after a write that moved a stream's tail, queue a notice when a
subscription could name the stream, judged from a copy of the subscription list."""

from __future__ import annotations

import time

from ._context import Context, names
from .model import Subscription
from .tasks import Task, TaskKind

# How long the append path trusts its copy of the subscription list. A subscription made
# elsewhere within this window is caught by the CHECK task its creation schedules after it.
REGISTRY_MAX_AGE = 2.0


class AppendNotices:
    def __init__(self, context: Context) -> None:
        self.context = context
        self._registry: list[Subscription] = []
        self._registry_read_at = float("-inf")

    def changed(self, path: str) -> None:
        """Called after a write that moved `path`'s tail: schedules a NOTICE when any
        subscription could link it. Reads the subscription list at most every
        REGISTRY_MAX_AGE seconds, and only while writes happen: nothing at rest."""
        if any(names(subscription, path) for subscription in self._live_registry()):
            self.context.scheduler.send(Task(TaskKind.NOTICE, path))

    def unconcerned(self, path: str) -> bool:
        """Whether no subscription can name `path`, known without any I/O: the list read
        within REGISTRY_MAX_AGE names none. False when `changed` must run (it may read the
        list, or queue a notice), which the caller then does off its event loop."""
        if time.monotonic() - self._registry_read_at > REGISTRY_MAX_AGE:
            return False
        return not any(names(subscription, path) for subscription in self._registry)

    def forget(self) -> None:
        """The list changed here: read it again before the next judgement."""
        self._registry_read_at = float("-inf")

    def _live_registry(self) -> list[Subscription]:
        now = time.monotonic()
        if now - self._registry_read_at > REGISTRY_MAX_AGE:
            self._registry = [s for s in self.context.store.all() if not s.deleted]
            self._registry_read_at = now
        return self._registry
