"""Chunks this process committed or read, so a read of recent history skips the Query.

What an entry says, "positions [start, end) of incarnation I hold these bytes" (or nothing, for
a void chunk), never stops being true. A chunk's item is written once, by the transaction that
commits it, and never rewritten: a reserved range is filled or voided, never both; sealing
replaces chunks with a segment holding the same bytes at the same positions; a deleted stream's
next incarnation has a new id. So an entry needs no check against DynamoDB, only a bound on its
memory. What a read still asks DynamoDB for is the stream's metadata: how far it may read (a
range committed past the published tail is not yet readable, and the read stops at the tail).

Only chunks whose bytes are in the item are kept (and void ones): a chunk in S3 would still
cost a GET, and its object may be collected once sealed. Entries are dropped oldest first once
they hold more than the cache's bytes; a read that finds a position not cached queries from
there, and what it reads is cached in turn, so many readers of one stream on one instance
share one reader's Query.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ._chunk_layout import Chunk

# What an entry costs beyond its bytes: the Chunk, its bytes object, its slots in the indexes
# (measured with tracemalloc: about 450 bytes for an entry of one byte).
_ENTRY_OVERHEAD = 450
# The most chunks one lookup walks under the lock (a read walks on with the next lookup).
_RUN_MOST = 4096


@dataclass
class _Incarnation:
    """The cached chunks of one incarnation, by their ends (kept sorted)."""

    ends: list[int] = field(default_factory=list)
    chunks: dict[int, Chunk] = field(default_factory=dict)


def cacheable(chunk: Chunk) -> bool:
    return chunk.void or (chunk.inline is not None and not chunk.sealed)


def _cost(chunk: Chunk) -> int:
    return len(chunk.inline or b"") + 8 * len(chunk.lengths or ()) + _ENTRY_OVERHEAD


class ChunkCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._by_incarnation: dict[str, _Incarnation] = {}
        # Every entry, oldest first, with what it costs.
        self._age: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def remember(self, incarnation: str, chunks: Iterable[Chunk]) -> None:
        """Keep these committed chunks of `incarnation` (those that can be kept)."""
        if self.max_bytes <= 0:
            return
        with self._lock:
            known = self._by_incarnation.setdefault(incarnation, _Incarnation())
            for chunk in chunks:
                if not cacheable(chunk) or chunk.end in known.chunks:
                    continue
                cost = _cost(chunk)
                if cost > self.max_bytes:
                    continue
                if not known.ends or chunk.end > known.ends[-1]:
                    known.ends.append(chunk.end)  # the usual case: in order
                else:
                    bisect.insort(known.ends, chunk.end)
                known.chunks[chunk.end] = chunk
                self._age[(incarnation, chunk.end)] = cost
                self._bytes += cost
            if not known.ends:
                del self._by_incarnation[incarnation]
            self._evict()

    def covering(self, incarnation: str, position: int) -> Chunk | None:
        """The cached chunk holding `position`, if there is one."""
        found = self.run(incarnation, position, position + 1)
        return found[0] if found else None

    def run(self, incarnation: str, position: int, limit: int) -> list[Chunk]:
        """The cached chunks laid end to end from the one holding `position`, up to a gap or
        the first that starts at `limit` or later, at most `_RUN_MOST` of them: what a read
        walking from `position` meets, found under one hold of the lock (a lock per chunk made
        two threads reading at once several times slower than one after the other; a bounded
        run keeps a writer remembering its chunks from waiting long behind a reader)."""
        found: list[Chunk] = []
        with self._lock:
            known = self._by_incarnation.get(incarnation)
            if known is None:
                return found
            ends, chunks = known.ends, known.chunks
            at = position
            for index in range(bisect.bisect_right(ends, position), len(ends)):
                chunk = chunks[ends[index]]
                # Chunks never overlap, so one starting after `at` leaves a gap before it.
                if chunk.start > at or (found and chunk.start >= limit) or len(found) == _RUN_MOST:
                    break
                found.append(chunk)
                at = chunk.end
        return found

    def _evict(self) -> None:
        while self._bytes > self.max_bytes and self._age:
            (incarnation, end), cost = self._age.popitem(last=False)
            self._bytes -= cost
            known = self._by_incarnation[incarnation]
            del known.chunks[end]
            del known.ends[bisect.bisect_left(known.ends, end)]
            if not known.ends:
                del self._by_incarnation[incarnation]
