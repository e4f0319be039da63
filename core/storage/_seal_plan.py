"""What sealing should do to one incarnation's stored items: a pure decision, so every case
(crash leftovers, concurrent sealers, forks, closed streams) is a unit test.

The items of an incarnation are chunks (one per append), void chunks (reserved ranges that
hold nothing, `core.storage._ranges`) and sealed segments, each covering [start, end) of the
stream and keyed by its end. A segment replaces the item at its own end and then the others it
covers, so at any moment some items may be covered by a segment (a sealer stopped halfway, or
lost a race): those are redundant, and reads are right with or without them. A segment never
spans a void chunk: voids stay as they are, tiny items between segments.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

MIB = 1024 * 1024
DEFAULT_SEGMENT_BYTES = 8 * MIB
DEFAULT_HOT_BYTES = 256 * 1024
# One page per default read response (1 MiB, less the JSON array's brackets and some room).
DEFAULT_PAGE_BYTES = MIB - 64


@dataclass(frozen=True)
class Stored:
    """One chunk or segment item, as a sealer sees it."""

    start: int
    end: int
    sealed: bool
    key: str | None = None  # the object of a segment (or of a chunk stored in S3)
    void: bool = False  # a void chunk: nothing to seal

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class SealPolicy:
    segment_bytes: int = DEFAULT_SEGMENT_BYTES  # what a segment grows to
    hot_bytes: int = DEFAULT_HOT_BYTES  # an open stream's newest bytes stay in DynamoDB
    page_bytes: int = DEFAULT_PAGE_BYTES  # a segment's read unit: a response takes whole pages

    def __post_init__(self) -> None:
        if self.page_bytes <= 0 or self.segment_bytes <= 0 or self.hot_bytes < 0:
            raise ValueError("sizes must be positive (hot_bytes may be 0)")


@dataclass(frozen=True)
class SealPlan:
    redundant: tuple[Stored, ...]  # covered by a segment already: delete
    run: tuple[Stored, ...]  # consecutive items to seal, cut into segments as they are read
    sealed_to: int  # where the sealed history ends once the run is sealed
    more: bool = False  # the run ends at a void chunk with more to seal past it


def cut_here(size: int, open_page_fill: int, policy: SealPolicy) -> bool:
    """Whether a segment holding `size` stream bytes ends after the item just added. It
    ends once it reaches the target size where a page ends full (or nearly: within 1/32 of
    a page), so that reads, which take whole pages, fill every response and never need a
    second object; it ends regardless two pages past the target."""
    if size < policy.segment_bytes:
        return False
    if size >= policy.segment_bytes + 2 * policy.page_bytes:
        return True
    return open_page_fill == 0 or open_page_fill >= policy.page_bytes - policy.page_bytes // 32


def marks(before: int, after: int, closing: bool, quantum: int) -> bool:
    """Whether a commit taking the tail from `before` to `after` marks the stream for the
    sealer: when it closes the stream, or carries the tail past a multiple of `quantum`
    (every commit that adds data, with a quantum of 0). So an open stream holds at most
    about two quanta of unsealed bytes, and marks cost one item write per quantum."""
    if closing:
        return True
    if quantum <= 0:
        return after > before
    return before // quantum != after // quantum


def plan(
    stored: Sequence[Stored], origin: int, tail: int, closed: bool, policy: SealPolicy
) -> SealPlan:
    """The plan for an incarnation whose own data spans [origin, tail): a closed stream is
    sealed to its tail, an open one up to `hot_bytes` before it. A segment shorter than half
    the target is grown by sealing it again with what follows it."""
    visible = sorted((x for x in stored if x.end <= tail), key=lambda x: (x.end, x.start))
    redundant = _covered(visible)
    dropped = set(redundant)
    cover = _contiguous([x for x in visible if x not in dropped], origin)
    bound = tail if closed else tail - policy.hot_bytes
    first = next(
        (i for i, x in enumerate(cover) if not x.sealed and not x.void and x.end <= bound), None
    )
    if first is None:
        return SealPlan(tuple(redundant), (), _sealed_prefix_end(cover, origin))
    before = cover[first - 1] if first > 0 else None
    if before is not None and before.sealed and before.size < policy.segment_bytes // 2:
        first -= 1  # grow the short segment before the chunks
    run: list[Stored] = []
    for item in cover[first:]:
        if item.end > bound or item.void:
            break  # a segment ends where a void begins
        run.append(item)
    rest = cover[first + len(run) :]
    more = any(not x.sealed and not x.void and x.end <= bound for x in rest)
    return SealPlan(tuple(redundant), tuple(run), run[-1].end, more)


def _covered(items: Sequence[Stored]) -> list[Stored]:
    """Items lying inside a segment that ends after them (none ends where another does:
    items are keyed by their end)."""
    segments = sorted((x for x in items if x.sealed), key=lambda x: x.end)
    ends = [s.end for s in segments]
    lowest_start = [0] * len(segments)
    running = None
    for index in range(len(segments) - 1, -1, -1):
        start = segments[index].start
        running = start if running is None else min(running, start)
        lowest_start[index] = running
    covered = []
    for item in items:
        index = bisect.bisect_right(ends, item.end)
        if index < len(segments) and lowest_start[index] <= item.start:
            covered.append(item)
    return covered


def _contiguous(cover: list[Stored], origin: int) -> list[Stored]:
    """The items that join up from `origin`; anything after a gap (which no committed
    stream has) is left alone. The first may begin before `origin`: where retention cut a
    stream, the items below are removed, and a segment may straddle the cut."""
    joined: list[Stored] = []
    position = origin
    voids = [item for item in cover if item.void]
    for item in cover:
        if item.end <= position:
            continue  # a void inside another void already passed; or retained no more
        if not joined and item.start < position:
            joined.append(item)
            position = item.end
            continue
        if item.start != position:
            # Voids may overlap (a reader voided a gap, then a writer its own range inside
            # it): one that covers the position, wherever it sorts, continues the run.
            covering = [v for v in voids if v.start <= position < v.end]
            if not covering:
                break
            item = max(covering, key=lambda v: v.end)
        joined.append(item)
        position = item.end
    return joined


def _sealed_prefix_end(cover: Sequence[Stored], origin: int) -> int:
    """Where the history with nothing left to seal (segments, and voids) ends."""
    position = origin
    for item in cover:
        if not (item.sealed or item.void):
            break
        position = item.end
    return position
