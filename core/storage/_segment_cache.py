"""Sealed segments this process has seen, so a catch-up read of sealed history skips the
Query that would find them again.

What an entry says, "positions [start, end) of incarnation I are the bytes of object K laid
out as directory D", stays true for as long as K exists: segment objects are never rewritten.
K is removed only with its incarnation, or by the collector once a larger segment replaced it
and the grace period passed; a read that finds it gone drops the entry and asks DynamoDB again.

The cache is bounded by what its entries hold (a segment and its page directory), whatever
the streams read: a reader walking the sealed history of many large streams cannot grow it
past `max_weight`, the least recently read incarnations going first. An entry that a segment
learnt later covers is dropped (the later one answers every position it did, reaching as far
or further), so an incarnation's entries never nest: sorted by start they are sorted by end
too, and the one that reaches furthest from a position is found by bisection.
"""

from __future__ import annotations

import threading
from bisect import bisect_right, insort
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._chunk_layout import Chunk

# A segment weighs one plus its pages: 50,000 is about 15 MB of entries, 6,000 segments of
# 8 pages (48 GB of sealed history at the default 8 MiB).
DEFAULT_MAX_WEIGHT = 50_000


def weight(segment: Chunk) -> int:
    return 1 + len(segment.pages or ())


class SegmentCache:
    def __init__(self, max_weight: int = DEFAULT_MAX_WEIGHT) -> None:
        self._lock = threading.Lock()
        # Each incarnation's segments sorted by (start, end), none inside another.
        self._by_incarnation: OrderedDict[str, list[Chunk]] = OrderedDict()
        self._max = max_weight
        self.weight = 0

    def remember(self, incarnation: str, segment: Chunk) -> None:
        assert segment.s3_key is not None
        with self._lock:
            known = self._by_incarnation.setdefault(incarnation, [])
            self._by_incarnation.move_to_end(incarnation)
            overlapping = _neighbours(known, segment)
            if any(_covers(old, segment) for old in overlapping):
                return  # one known already answers every position it would
            for old in [old for old in overlapping if _covers(segment, old)]:
                known.remove(old)
                self.weight -= weight(old)
            insort(known, segment, key=_order)
            self.weight += weight(segment)
            self._shed(incarnation)

    def covering(self, incarnation: str, position: int) -> Chunk | None:
        """A known segment holding `position` (the one reaching furthest, if several do)."""
        with self._lock:
            known = self._by_incarnation.get(incarnation)
            if not known:
                return None
            self._by_incarnation.move_to_end(incarnation)
            # The last segment starting at or before `position` ends furthest of those that do.
            index = bisect_right(known, position, key=lambda s: s.start) - 1
            if index >= 0 and position < known[index].end:
                return known[index]
            return None

    def next_start(self, incarnation: str, position: int) -> int | None:
        """Where the first known segment starting after `position` starts (None: none does).
        A reader that found no segment holding `position` meets none before there."""
        with self._lock:
            known = self._by_incarnation.get(incarnation)
            if not known:
                return None
            index = bisect_right(known, position, key=lambda s: s.start)
            return known[index].start if index < len(known) else None

    def forget(self, incarnation: str) -> None:
        """Drop what is known of an incarnation: one of its objects was found gone, so others
        learnt at the same time may be too (segments grown again and again)."""
        with self._lock:
            for segment in self._by_incarnation.pop(incarnation, ()):
                self.weight -= weight(segment)

    def _shed(self, keep: str) -> None:
        """Back under the bound: the least recently read incarnations first, then the lowest
        segments of the one just read (a single stream larger than the whole bound)."""
        while self.weight > self._max and len(self._by_incarnation) > 1:
            oldest = next(iter(self._by_incarnation))
            if oldest == keep:
                self._by_incarnation.move_to_end(keep)
                continue
            for segment in self._by_incarnation.pop(oldest):
                self.weight -= weight(segment)
        known = self._by_incarnation[keep]
        while self.weight > self._max and len(known) > 1:
            self.weight -= weight(known.pop(0))


def _order(segment: Chunk) -> tuple[int, int]:
    return segment.start, segment.end


def _covers(outer: Chunk, inner: Chunk) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def _neighbours(known: list[Chunk], segment: Chunk) -> list[Chunk]:
    """The known segments that may cover `segment` or lie inside it: those overlapping it
    (non-nested and sorted, they are one run around where it would go)."""
    lo = bisect_right(known, segment.start, key=lambda s: s.end)
    hi = bisect_right(known, segment.end - 1, key=lambda s: s.start)
    return known[lo:hi]
