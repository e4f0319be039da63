"""Sealed segments this process has seen, so a catch-up read of sealed history skips the
Query that would find them again.

What an entry says, "positions [start, end) of incarnation I are the bytes of object K laid
out as directory D", stays true for as long as K exists: segment objects are never rewritten.
K is removed only with its incarnation, or by the collector once a larger segment replaced it
and the grace period passed; a read that finds it gone drops the entry and asks DynamoDB again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._chunk_layout import Chunk

_MAX_INCARNATIONS = 4096


class SegmentCache:
    def __init__(self, max_incarnations: int = _MAX_INCARNATIONS) -> None:
        self._lock = threading.Lock()
        self._by_incarnation: OrderedDict[str, dict[str, Chunk]] = OrderedDict()
        self._max = max_incarnations

    def remember(self, incarnation: str, segment: Chunk) -> None:
        assert segment.s3_key is not None
        with self._lock:
            known = self._by_incarnation.setdefault(incarnation, {})
            known[segment.s3_key] = segment
            self._by_incarnation.move_to_end(incarnation)
            while len(self._by_incarnation) > self._max:
                self._by_incarnation.popitem(last=False)

    def covering(self, incarnation: str, position: int) -> Chunk | None:
        """A known segment holding `position` (the one reaching furthest, if several do)."""
        with self._lock:
            known = self._by_incarnation.get(incarnation)
            if not known:
                return None
            self._by_incarnation.move_to_end(incarnation)
            holding = [s for s in known.values() if s.start <= position < s.end]
        return max(holding, key=lambda s: s.end, default=None)

    def forget(self, incarnation: str) -> None:
        """Drop what is known of an incarnation: one of its objects was found gone, so others
        learnt at the same time may be too (segments grown again and again)."""
        with self._lock:
            self._by_incarnation.pop(incarnation, None)
