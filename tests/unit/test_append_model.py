"""A model of the append protocol (`core.storage._append`, `_settle`, `_ranges`), explored.

The table is a few dicts; each step an actor takes is one atomic DynamoDB operation with the
conditions the store writes (a reservation, a fill, a void, a publication, a hold, a direct
commit, a claim removed by the sealer), and readable data is what `_ranges.resolve` (the
store's own function) says it is. Writers reserve and fill, or commit directly (closes,
Stream-Seq appends, a cold writer), producers' requests check their predecessor with
`_ranges.fill_accepts` (the store's own condition); readers settle, void and publish; the
sealer drops old claims. A random scheduler interleaves them, any writer may stop for good
between any two of its steps (a Lambda that died) or pause for a while (a slow one), and the
clock moves on. After every step the invariants are checked:

- ranges never overlap, and a range holds data only if its claim says filled (or is gone);
- readable data only grows, and what was readable never changes;
- every acknowledged append is stored once, at the offset it was told;
- the published tail is at or below the readable end;
- a producer's stored requests are in the order of their seqs, each once;
- after a close is acknowledged nothing else is, and nothing lies past the close's tail.

It runs thousands of schedules in a few seconds; `test_the_crash_points_explored` prints
which steps writers stopped after.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from durable_streams_aws.core.protocol.headers import ProducerClaim
from durable_streams_aws.core.protocol.producer import (
    ProducerOutcome,
    ProducerState,
    decide_producer,
)
from durable_streams_aws.core.storage._producer_order import within_pipeline
from durable_streams_aws.core.storage._ranges import Gap, Placed, fill_accepts, resolve, void_due

VOID_AFTER = 2.0
CLAIM_GRACE = 60.0  # the sealer forgets claims this old (the store: an hour)


@dataclass
class Chunk:
    start: int
    number: int
    data: bytes | None  # None: void
    first_number: int | None = None


@dataclass
class Table:
    tail: int = 0  # published
    tn: int = 0
    rsv: int = 0
    rn: int = 0
    rt: float = 0.0
    closed: bool = False
    hold: float = 0.0
    chunks: dict[int, Chunk] = field(default_factory=dict)  # by end
    claims: dict[int, tuple[str, float]] = field(default_factory=dict)  # n -> (kind, at)
    producers: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # epoch, seq, end

    def placed(self, above: int, upto: int) -> list[Placed]:
        return [
            Placed(c.start, end, c.number, c.data is None, c.first_number)
            for end, c in self.chunks.items()
            if above < end <= upto
        ]

    def resolution(self) -> tuple[int, int, tuple[Gap, ...]]:
        r = resolve(self.tail, self.tn, self.rsv, self.rn, self.placed(self.tail, self.rsv))
        return r.readable, r.readable_number, r.gaps

    def readable_bytes(self) -> dict[int, int]:
        """Offset -> byte of everything readable (voids hold none)."""
        readable = self.resolution()[0]
        found: dict[int, int] = {}
        for end, chunk in self.chunks.items():
            if end <= readable and chunk.data is not None:
                for index, byte in enumerate(chunk.data):
                    found[chunk.start + index] = byte
        return found


@dataclass
class World:
    table: Table = field(default_factory=Table)
    now: float = 0.0
    acked: list[tuple[bytes, int, float]] = field(default_factory=list)  # record, end, when
    produced: list[tuple[str, int, int]] = field(default_factory=list)  # producer, seq, end
    closed_at: tuple[int, float] | None = None  # the close's tail, when it was acknowledged
    stops: Counter[str] = field(default_factory=Counter)


Step = Iterator[str]  # an actor yields the name of the step it just took


def reserved_writer(
    world: World, record: bytes, claim: ProducerClaim | None = None, check_first: bool = False
) -> Step:
    """Reserve, then fill (the store's reserved mode); a voided range is reserved anew. A
    producer's request that its instance's memory does not vouch for (`check_first`) reads
    the producer's state first, and reserves only if that state would accept it; one a
    pipeline explains waits for its predecessor first."""
    t = world.table
    checked = claim is None or not check_first
    while True:
        if t.closed:
            return
        if t.hold > world.now:
            yield "held off"
            continue
        if not checked:
            assert claim is not None
            stored = t.producers.get(claim.producer_id)
            state = None if stored is None else ProducerState(stored[0], stored[1])
            outcome = decide_producer(state, claim).outcome
            checked = True
            yield "read its producer"
            if outcome is ProducerOutcome.SEQUENCE_GAP and within_pipeline(
                state, claim.epoch, claim.seq
            ):
                yield "waits for its predecessor"
            elif outcome is not ProducerOutcome.ACCEPT:
                return  # refused, or a duplicate: nothing reserved, nothing stored
            continue  # the reservation is a step of its own, on the stream as it is then
        t.rsv += len(record)
        t.rn += 1
        t.rt = world.now
        end, number, reserved_at = t.rsv, t.rn, world.now
        yield "reserved"
        if world.now - reserved_at > VOID_AFTER / 2:
            _void_own(t, end - len(record), end, number, world.now)
            yield "gave up a slow range"
            continue
        if number in t.claims or end in t.chunks:
            yield "found its range voided"
            continue
        start = end - len(record)
        if claim is not None:
            stored = t.producers.get(claim.producer_id)
            state = None if stored is None else ProducerState(stored[0], stored[1])
            if not fill_accepts(state, None if stored is None else stored[2], claim, start):
                _void_own(t, start, end, number, world.now)
                yield "voided its own range"
                decision = decide_producer(state, claim)
                if decision.outcome is ProducerOutcome.ACCEPT:
                    continue  # its predecessor landed above the range: reserve anew
                if decision.outcome is ProducerOutcome.SEQUENCE_GAP:
                    yield "waits for its predecessor"
                    continue
                return  # a duplicate, or refused: nothing stored
            t.producers[claim.producer_id] = (claim.epoch, claim.seq, end)
            world.produced.append((claim.producer_id, claim.seq, end))
        t.chunks[end] = Chunk(start, number, record)
        t.claims[number] = ("filled", world.now)
        world.acked.append((record, end, world.now))
        yield "filled"
        return


def _void_own(t: Table, start: int, end: int, number: int, now: float) -> None:
    if number not in t.claims:
        t.claims[number] = ("void", now)
        t.chunks.setdefault(end, Chunk(start, number, None, number))


def settle(world: World, publish: bool, seen: dict[tuple[int, int], float]) -> Step:
    """A reader's settling: look above the published tail, void a gap seen for long enough
    (all its claims at once, then the void chunk), publish."""
    t = world.table
    readable, number, gaps = t.resolution()
    yield "looked above the tail"
    if gaps:
        gap = gaps[0]
        # Every gap's time runs from when it is first seen, the ones above the first too.
        since = [
            seen.setdefault((g.start, g.numbers[0] if g.numbers else 0), world.now) for g in gaps
        ]
        if void_due(since[0], t.rt, world.now, VOID_AFTER) and _may_void(t, gap):
            for k in gap.numbers:
                t.claims[k] = ("void", world.now)
            first = gap.numbers[0] if gap.numbers else number
            last = gap.numbers[-1] if gap.numbers else number
            t.chunks.setdefault(gap.end, Chunk(gap.start, last, None, first))
            yield "voided a gap"
            readable, number, gaps = t.resolution()
            yield "looked again"
    if publish and readable > t.tail:
        t.tail, t.tn = readable, number
        yield "published"


def _may_void(t: Table, gap: Gap) -> bool:
    """The void transaction's conditions: the gap still above the published tail, each of
    its claims absent or void, and at its end no item but this same void."""
    at_end = t.chunks.get(gap.end)
    return (
        t.tail <= gap.start
        and all(t.claims.get(k, ("void",))[0] == "void" for k in gap.numbers)
        and (at_end is None or (at_end.data is None and at_end.start == gap.start))
    )


def reader(world: World) -> Step:
    seen: dict[tuple[int, int], float] = {}
    while True:
        yield from settle(world, publish=True, seen=seen)
        yield "waited"


def direct_writer(world: World, record: bytes, close: bool = False) -> Step:
    """A direct commit (a close, a Stream-Seq append, a cold writer): settle what is pending,
    holding reservations off, then commit conditioned on the exact state it read."""
    t = world.table
    seen: dict[tuple[int, int], float] = {}
    held = 0.0  # the hold this writer placed (0: none)
    while True:
        if t.closed:
            return
        read = (t.tail, t.rsv, t.rn)
        yield "read the stream"
        if read[0] != read[1]:
            yield from settle(world, publish=True, seen=seen)
            if t.tail != t.rsv:
                if not t.closed and (t.hold < world.now or t.hold == held):
                    t.hold = held = world.now + 2 * VOID_AFTER  # placed, or renewed
                    yield "held reservations off"
                yield "waits for pending ranges"
                continue
            continue
        if (t.tail, t.rsv, t.rn) != read or t.closed:
            yield "lost the race"
            continue
        end = read[0] + len(record)
        if record:
            t.rn += 1
            t.chunks[end] = Chunk(read[0], t.rn, record)
        t.tail = t.rsv = end
        t.tn = t.rn
        if held:
            t.hold = 0.0
        if close:
            t.closed = True
            world.closed_at = (end, world.now)
        if record:
            world.acked.append((record, end, world.now))
        yield "committed"
        return


def sealer(world: World) -> Step:
    """Forgets claims of published ranges older than the grace."""
    t = world.table
    while True:
        for number, (_, at) in list(t.claims.items()):
            if number <= t.tn and world.now - at > CLAIM_GRACE:
                del t.claims[number]
        yield "forgot old claims"


def check(world: World, history: list[dict[int, int]]) -> None:
    t = world.table
    # Data never overlaps anything (a void may overlap another void: a writer voided its own
    # range while a reader voided the gap around it; both hold nothing).
    spans = sorted((c.start, end, c.data is None) for end, c in t.chunks.items())
    for index, (_, end, void) in enumerate(spans):
        for other_start, _, other_void in spans[index + 1 :]:
            if other_start >= end:
                break
            assert void and other_void, f"ranges overlap: {spans}"
    for end, chunk in t.chunks.items():
        if chunk.data is not None and chunk.number in t.claims:
            assert t.claims[chunk.number][0] == "filled", f"data in a voided range at {end}"
    readable, _, _ = t.resolution()
    assert t.tail <= readable <= t.rsv
    now = t.readable_bytes()
    if history:
        before = history[-1]
        assert all(now.get(k) == v for k, v in before.items()), "readable data changed"
    history.append(now)
    stored = Counter(c.data for c in t.chunks.values() if c.data is not None)
    for record, end, _ in world.acked:
        assert stored[record] == 1, f"{record!r} stored {stored[record]} times"
        assert t.chunks[end].data == record, f"{record!r} not at its offset"
    by_producer: dict[str, list[tuple[int, int]]] = {}
    for producer, seq, end in world.produced:
        by_producer.setdefault(producer, []).append((end, seq))
    for entries in by_producer.values():
        seqs = [seq for _, seq in sorted(entries)]
        assert seqs == sorted(set(seqs)), f"a producer's data out of order: {seqs}"
    if world.closed_at is not None:
        final, when = world.closed_at
        assert all(end <= final for _, end, _ in world.acked), "acknowledged past the close"
        assert all(at <= when for _, _, at in world.acked), "acknowledged after the close"
        assert all(c.start < final or end <= final for end, c in t.chunks.items())


def explore(seed: int) -> World:
    rng = random.Random(seed)
    world = World()
    actors: dict[str, Step] = {}
    for index in range(rng.randint(2, 5)):
        record = f"<w{index}>".encode()
        kind = rng.random()
        if kind < 0.55:
            actors[f"w{index}"] = reserved_writer(world, record)
        elif kind < 0.85:
            # One producer pipelining its seqs, now and then sending one again (a retry).
            seq = index if rng.random() < 0.8 else max(0, index - 1)
            claim = ProducerClaim("p", 0, seq)
            check_first = rng.random() < 0.5
            actors[f"w{index}"] = reserved_writer(world, record, claim, check_first)
        else:
            actors[f"w{index}"] = direct_writer(world, record)
    if rng.random() < 0.4:
        actors["close"] = direct_writer(world, b"", close=True)
    actors["reader"] = reader(world)
    actors["sealer"] = sealer(world)
    paused: dict[str, float] = {}
    history: list[dict[int, int]] = []
    last_step: dict[str, str] = {}
    for _ in range(400):
        ready = [name for name in actors if paused.get(name, 0.0) <= world.now]
        if not ready:
            world.now += 0.5
            continue
        name = rng.choice(ready)
        try:
            last_step[name] = next(actors[name])
        except StopIteration:
            del actors[name]
            if not any(n.startswith(("w", "close")) for n in actors):
                break
            continue
        world.now += rng.choice((0.0, 0.001, 0.05, 0.3, 1.5))
        if name.startswith("w") and rng.random() < 0.08:
            world.stops[last_step[name]] += 1
            del actors[name]  # stopped for good, after this step
        elif name.startswith("w") and rng.random() < 0.1:
            paused[name] = world.now + rng.choice((0.5, 3.0, 90.0))  # a slow one
        check(world, history)
    # Whatever is left pending is voided in the end, and nothing changes what was readable.
    world.now += 2 * VOID_AFTER + 1
    for _ in range(8):
        for _step in settle(world, publish=True, seen={}):
            check(world, history)
        world.now += VOID_AFTER + 1
    assert world.table.tail == world.table.rsv, "a pending range was never settled"
    return world


@pytest.mark.parametrize("block", range(20))
def test_random_schedules_with_writers_that_stop_anywhere(block: int) -> None:
    for seed in range(block * 150, (block + 1) * 150):
        explore(seed)


def test_the_crash_points_explored() -> None:
    stops: Counter[str] = Counter()
    for seed in range(3000):
        stops += explore(seed).stops
    print("\nwriters stopped for good after each kind of step:", dict(stops))
    steps = ("reserved", "filled", "read the stream", "held reservations off", "read its producer")
    for step in steps:
        assert stops[step] > 0, f"no writer ever stopped after {step!r}"
