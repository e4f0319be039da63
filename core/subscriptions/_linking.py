"""The link items: who writes them (a creation's backfill, an added stream, a noticed append,
a check), who drops them (a removal, the sweep), and the links this process knows exist."""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import replace

from ..storage.aws import Conflict
from ._context import Context, matches
from .model import StreamTail, Subscription

# Longer than any request or task can run (a Lambda invocation lasts 15 minutes at most): a
# backfill or a notice that read the subscription before its removal may still be writing
# links this long after it, so a tombstone's links are dropped again until then.
LINK_WRITERS_GRACE = 900.0
# Links this process has made or seen (a notice skips writing them again), the most recent.
_KNOWN_LINKS = 100_000


class Linker:
    def __init__(self, context: Context) -> None:
        self.context = context
        self._known = _RecentKeys(_KNOWN_LINKS)

    def backfill(self, subscription: Subscription) -> None:
        """Link the existing streams the subscription names at their current tails, so that
        it starts from now rather than replaying history."""
        store = self.context.store
        pattern = subscription.config.pattern
        if pattern is not None:
            for path in self.context.streams_matching(pattern):
                tail = store.tails([path]).get(path)
                if tail is not None:
                    explicit = path in subscription.explicit
                    store.link(subscription, path, glob=True, explicit=explicit, at=tail)
        self.link_explicit(subscription, subscription.explicit)

    def link_explicit(self, subscription: Subscription, paths: Iterable[str]) -> None:
        """Mark `paths` linked explicitly; a new link starts at the stream's tail (or at 0)."""
        paths = list(paths)
        tails = self.context.store.tails(paths)
        for path in paths:
            at = tails.get(path, StreamTail(None, 0))
            glob = matches(subscription, path)
            self.context.store.link(subscription, path, glob=glob, explicit=True, at=at)

    def link_noticed(self, subscription: Subscription, paths: Iterable[str]) -> bool:
        """Link streams an append was noticed on, from their beginning (each was created after
        the backfill looked), skipping those known linked; True if any was written."""
        linked = False
        for path in paths:
            key = (subscription.incarnation, path)
            if key not in self._known:
                glob, explicit = matches(subscription, path), path in subscription.explicit
                self.context.store.link(subscription, path, glob=glob, explicit=explicit, at=None)
                self._known.add(key)
                linked = True
        return linked

    def link_unlinked_matches(self, subscription: Subscription) -> None:
        """Link, from their beginning, the streams the pattern names that are not linked yet
        (appends on other instances with an older subscription list were not noticed)."""
        pattern = subscription.config.pattern
        if pattern is None:
            return
        linked = {link.path for link in self.context.store.links(subscription)}
        for path in self.context.streams_matching(pattern):
            if path not in linked:
                explicit = path in subscription.explicit
                self.context.store.link(subscription, path, glob=True, explicit=explicit, at=None)

    def unlink_explicit(self, subscription: Subscription, path: str) -> None:
        """Drop the explicit mark of `path`'s link; the link stays while the pattern names it."""
        self._known.discard((subscription.incarnation, path))
        with contextlib.suppress(Conflict):  # no link was left to unmark
            keep = matches(subscription, path)
            self.context.store.unlink_explicit(subscription, path, keep=keep)

    def drop_links(self, tombstone: Subscription) -> None:
        """Delete a removed subscription's link items; once no writer that read it before
        its removal can still be adding links, record on the tombstone that they are gone
        for good (until then the sweep drops them again)."""
        store = self.context.store
        store.drop_links(tombstone)
        if self.context.clock() - tombstone.deleted_at <= LINK_WRITERS_GRACE:
            return
        with contextlib.suppress(Conflict):  # re-created meanwhile: its links are its own
            store.replace(replace(tombstone, links_dropped=True), tombstone.version)


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
