"""Reserved ranges: which of a stream's bytes are readable, and what a stuck range needs.

Appends to a hot stream reserve their byte range first (one atomic counter on the stream
item) and fill it afterwards (their chunk item); see `core.storage.dynamo`. Above the stream's
published tail, then, lie ranges in three states: filled (a chunk item), void (a void chunk
item: the range holds no data, ever) and pending (reserved, neither yet). Every range has a
number, given with its reservation, in the order of its offsets; a pending range is claimed by
its number (`k#<inc>/<n>`) when it is filled or voided, whichever comes first, so that a range is
never both.

This module is the pure part: from the items found above the published tail, where readable
data ends and which ranges a gap there holds (`resolve`), whether a gap has waited long enough
to be voided (`void_due`), and what a producer's state must be for a fill to store a request
of it (`fill_accepts`: the append path writes it as a DynamoDB condition).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..protocol.headers import ProducerClaim
from ..protocol.producer import ProducerState

# A pending range older than this is voided by whoever meets it (a reader, a writer
# publishing the tail): its writer died, or is too slow to keep readers waiting. A writer
# never starts a fill of a range older than half of it, so a fill in flight rarely loses.
DEFAULT_VOID_AFTER_SECONDS = 2.0
# Every this many ranges (by number), the writer of the range settles and publishes the tail,
# so readers never have many ranges to look at above it; a reader publishes when this many
# are unpublished, or when the stream has been quiet for `QUIET_SECONDS` (a writer that
# publishes may be gone). Readers of a busy stream so write to its item rarely.
PUBLISH_EVERY = 16
QUIET_SECONDS = 1.0


@dataclass(frozen=True)
class Placed:
    """An item above the published tail, as far as resolution cares."""

    start: int
    end: int
    number: int  # its range number (a void item: the highest number it voids)
    void: bool = False
    first_number: int | None = None  # a void item's lowest number (None: `number`)

    @property
    def lowest(self) -> int:
        return self.number if self.first_number is None else self.first_number


@dataclass(frozen=True)
class Gap:
    """Pending ranges: bytes [start, end) and the numbers of the ranges reserved there."""

    start: int
    end: int
    numbers: tuple[int, ...]


@dataclass(frozen=True)
class Resolution:
    readable: int  # committed data (or voids) runs without a break up to here
    readable_number: int  # the number of the last range below `readable`
    gaps: tuple[Gap, ...] = ()  # every run of pending ranges up to the reserved end, in order

    @property
    def gap(self) -> Gap | None:
        """The first pending ranges, where readable data ends (None: nothing pending)."""
        return self.gaps[0] if self.gaps else None


def resolve(
    published: int,
    published_number: int,
    reserved: int,
    reserved_number: int,
    placed: Iterable[Placed],
) -> Resolution:
    """From the published tail, take every item that starts at or before the readable end
    and reaches past it, until none does: that is where readable data ends (items that end at
    or below it, such as chunks a segment replaced, or a void inside a larger void, are passed
    over). The first item beyond is past a gap of pending ranges, whose numbers are those
    between the readable end's and that item's (ranges are numbered in the order of their
    offsets); with no item beyond, the newest ranges up to the reserved end are pending. The
    same from that item on finds the gaps after the first, so that each is known (and its
    writer's time runs) from when it is first seen, not once the gaps below it are settled."""
    ahead = sorted(placed, key=lambda p: (p.start, p.end))
    readable, readable_number = _run_from(published, published_number, ahead)
    gaps: list[Gap] = []
    position, number = readable, readable_number
    while True:
        beyond = [item for item in ahead if item.start > position]
        if not beyond:
            break
        following = beyond[0]
        numbers = tuple(range(number + 1, following.lowest))
        gaps.append(Gap(position, following.start, numbers))
        position, number = _run_from(following.start, following.lowest - 1, ahead)
    if position < reserved:
        gaps.append(Gap(position, reserved, tuple(range(number + 1, reserved_number + 1))))
    return Resolution(readable, readable_number, tuple(gaps))


def _run_from(position: int, number: int, ahead: list[Placed]) -> tuple[int, int]:
    """Where the items that start at or before `position` and reach past it, one after the
    other, end; and the highest range number among them (at least `number`)."""
    progressed = True
    while progressed:
        progressed = False
        for item in ahead:
            if item.start <= position < item.end:
                position, number = item.end, max(number, item.number)
                progressed = True
    return position, number


def void_due(first_seen: float, last_reserved_at: float, now: float, after: float) -> bool:
    """Whether a gap may be voided now: it has been seen pending for `after` seconds here, or
    no range at all has been reserved for that long (so every pending one is that old)."""
    return now - first_seen >= after or now - last_reserved_at >= after


def fill_accepts(
    stored: ProducerState | None, stored_end: int | None, claim: ProducerClaim, start: int
) -> bool:
    """Whether a fill at `start` may store this producer request, given the producer's stored
    state (None: none, or another incarnation's) and where its last stored data ends: the
    request's predecessor must be the last stored (seq - 1 of the same epoch; for seq 0, an
    older epoch or nothing), and stored at or below `start`, so that a producer's data keeps
    the order of its seqs whatever order their ranges were reserved in."""
    ordered = stored_end is None or stored_end <= start
    if claim.seq == 0:
        return stored is None or (stored.epoch < claim.epoch and ordered)
    return (
        stored is not None
        and stored.epoch == claim.epoch
        and stored.last_seq == claim.seq - 1
        and ordered
    )
