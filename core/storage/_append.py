"""The append path: two ways to commit, chosen per stream by how contended it is.

**Direct** (a stream one writer appends to, and every close and Stream-Seq append): the
writer knows the stream's state (remembered from its last commit, or read) and commits data,
tail, producer state and closure in one transaction conditioned on that exact state. Warm,
that is one call per append. Two writers of one stream race: only one wins per tail value,
and every loser's call is wasted.

**Reserved** (a stream several writers append to): the writer first reserves its byte range,
one `UpdateItem` adding its length to the stream's reserved end and one to its range count
(conditioned only on what rarely changes: incarnation, not closed, not deleted, not expired),
which answers the range [end - length, end) and its number n. Then it fills the range: one
transaction writing its chunk at `c#<end>`, the claim `k#<inc>/<n>` (which fails if the range was
voided), and its producer state with conditions derived from the request itself (seq n - 1 of
the same epoch, stored at or below the range's start: pipelined requests that reserved out of
order never reorder a producer's data). Two calls per append whatever the number of writers,
and no call is lost to a race. A range is readable once every range below it is filled or
void (`core.storage._settle`); a writer that dies between its two calls leaves a pending range
that readers void after `DEFAULT_VOID_AFTER_SECONDS`, and a late fill of a voided range fails
on its claim, so it can never appear inside a void.

A writer starts direct; when a direct commit loses a race it switches to reserved for that
stream, and stays while reservations show other writers (its range number more than one past
its previous one), for `RecentWrites.hot_seconds`. Closes and Stream-Seq appends are always
direct: their
conditions must hold at the moment their data commits. A direct commit needs nothing pending
(the published tail equal to the reserved end), so it settles pending ranges first, waiting
(with jittered backoff) while they are being filled.

Inside one process, writers of one stream take turns for direct commits (they would only
lose races to each other); the remembered state is read inside the turn. A producer's
pipelined requests are applied in sequence order (`ProducerOrder`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol

from ..protocol.append import AppendDecision, AppendIntent, Verdict, WriteState, decide_append
from ..protocol.headers import ProducerClaim
from ..protocol.producer import ProducerDecision, ProducerOutcome, ProducerState
from ..telemetry import Metric, Telemetry
from . import _items as items
from . import _requests as requests
from ._chunks import ChunkStore, StoredBody
from ._group import GroupCommits, Waiting
from ._producer_order import ProducerOrder, within_pipeline
from ._ranges import PUBLISH_EVERY
from ._recent import RecentWrites
from ._seal_plan import marks
from ._settle import Claim, Settler
from .aws import Conflict, call
from .model import AppendOutcome, Payload, Presence, StoreUnavailable, StreamInfo

# Consecutive throttled reads one append sits out (backing off 25 ms, 50 ms, ... 3.2 s).
_MAX_THROTTLED_READS = 8
# A producer request that finds its predecessor not stored yet waits this long for it (a
# pipelining producer whose requests reached different instances out of order), when the
# predecessor is one a pipeline explains (`within_pipeline`).
SEQUENCE_WAIT_SECONDS = 1.0
# A transaction's limit on its actions.
_MAX_ACTIONS = 100


class _Mode(Enum):
    DIRECT = "direct"
    RESERVED = "reserved"


class _Retry(Enum):
    """Why an append attempt did not finish."""

    CONFLICT = "conflict"  # a lost race or a stale memory: decide again, at once
    THROTTLED = "throttled"  # the read was throttled: back off, then retry
    BUSY = "busy"  # ranges are being filled below: back off a little, then look again


@dataclass
class _Known:
    info: StreamInfo
    producer: ProducerState | None
    fresh: bool  # read (or found by a failed condition) in this append, not remembered


@dataclass
class _Attempt:
    """What one append carries from attempt to attempt."""

    mode: _Mode
    known: _Known | None = None
    guessed: bool = False  # memory was consulted: from now on the stream is read
    body: StoredBody | None = None
    waited_for_sequence: bool = False
    producer_checked: bool = False  # its producer's state was read before reserving
    held_until: float | None = None  # this append holds reservations off until then


@dataclass(frozen=True)
class _AwaitPredecessor:
    """The producer's request before this one is not stored, but one a pipeline explains may
    be stored soon (sent to another instance): wait for it, then try again; `refusal` is the
    answer if it is not stored in time."""

    info: StreamInfo
    refusal: AppendOutcome


def reservable(intent: AppendIntent) -> bool:
    """Whether an append may reserve its range: not a close, not Stream-Seq, and with data."""
    return not intent.close and intent.stream_seq is None and intent.has_body


class AppendStore(Protocol):
    """What the append path shares with its store (`DynamoStore`): clients, this process's
    memory of its writers and settings. A port, so that this module does not import the store
    that builds it."""

    dynamodb: Any
    table: str
    chunks: ChunkStore
    turns: GroupCommits
    recent: RecentWrites
    settler: Settler
    telemetry: Telemetry
    seal_mark_bytes: int
    write_deadline: float
    clock: Callable[[], float]
    sleep: Callable[[float], None]

    def live(self, info: StreamInfo | None) -> StreamInfo | None: ...

    def get_for_write(
        self, path: str, producer_id: str | None
    ) -> tuple[StreamInfo | None, dict[str, Any] | None] | None: ...

    def get_for_write_many(
        self, path: str, producer_ids: list[str]
    ) -> tuple[StreamInfo | None, dict[str, dict[str, Any]]] | None: ...

    def write(self, actions: list[dict[str, Any]]) -> None: ...


class Appender:
    """Appends for a `DynamoStore` (which it shares clients, memory and settings with)."""

    def __init__(self, store: AppendStore) -> None:
        self.store = store
        self.order = ProducerOrder()

    # ---------------------------------------------------------------- the loop

    def append(self, path: str, intent: AppendIntent, payload: Payload) -> AppendOutcome:
        """Waits (a producer's turn, its predecessor) on this thread."""
        claim = intent.producer
        if claim is None:
            return _answer(self._append(path, intent, payload, self._attempt(path, intent)))
        self.order.enter(path, claim.producer_id, claim.epoch, claim.seq, self.store.write_deadline)
        outcome = None
        try:
            attempt = self._attempt(path, intent)
            while True:
                step = self._append(path, intent, payload, attempt)
                if isinstance(step, AppendOutcome):
                    outcome = step
                    return outcome
                attempt.waited_for_sequence = True
                if not self._await_predecessor(step.info, claim):
                    outcome = step.refusal
                    return outcome
        finally:
            self.order.leave(path, claim.producer_id, claim.epoch, claim.seq, _stored(outcome))

    async def append_async(
        self,
        path: str,
        intent: AppendIntent,
        payload: Payload,
        run: Callable[..., Awaitable[Any]],
    ) -> AppendOutcome:
        """`append` for a caller on an event loop: the waits are made there, holding no
        thread, and the store's calls through `run` (onto a thread)."""
        claim = intent.producer
        if claim is None:
            step = await run(self._append, path, intent, payload, self._attempt(path, intent))
            return _answer(step)
        timeout = self.store.write_deadline
        await self.order.enter_async(path, claim.producer_id, claim.epoch, claim.seq, timeout)
        # Once counted in flight, it runs to its answer even if the caller is cancelled: its
        # store calls go on in a thread, and it leaves the order only when they are done.
        turn = asyncio.ensure_future(self._in_turn(path, intent, payload, claim, run))
        return await asyncio.shield(turn)

    async def _in_turn(
        self,
        path: str,
        intent: AppendIntent,
        payload: Payload,
        claim: ProducerClaim,
        run: Callable[..., Awaitable[Any]],
    ) -> AppendOutcome:
        outcome = None
        try:
            attempt = self._attempt(path, intent)
            while True:
                step = await run(self._append, path, intent, payload, attempt)
                if isinstance(step, AppendOutcome):
                    outcome = step
                    return outcome
                attempt.waited_for_sequence = True
                if not await self._await_predecessor_async(step.info, claim, run):
                    outcome = step.refusal
                    return outcome
        finally:
            self.order.leave(path, claim.producer_id, claim.epoch, claim.seq, _stored(outcome))

    def _attempt(self, path: str, intent: AppendIntent) -> _Attempt:
        hot = reservable(intent) and self.store.recent.hot(path)
        return _Attempt(_Mode.RESERVED if hot else _Mode.DIRECT)

    def _append(
        self, path: str, intent: AppendIntent, payload: Payload, attempt: _Attempt
    ) -> AppendOutcome | _AwaitPredecessor:
        store = self.store
        throttled = busy = 0
        for number in self._attempts():
            if attempt.mode is _Mode.DIRECT:
                # With the other direct appends of the stream waiting here (memory is read
                # by whoever commits them, once they wait no more).
                step = store.turns.submit(path, (intent, payload, attempt), self._direct_group)
            else:
                step = self._reserved(path, intent, payload, attempt)
            if isinstance(step, (AppendOutcome, _AwaitPredecessor)):
                return step
            if step is _Retry.THROTTLED:
                if throttled >= _MAX_THROTTLED_READS:
                    raise StoreUnavailable("reads of the stream kept being throttled")
                store.telemetry.count(Metric.AWS_THROTTLES)
                store.sleep(0.025 * 2**throttled)
                throttled += 1
            elif step is _Retry.BUSY:
                busy += 1
                self._pause(busy)
            elif number >= 2:
                self._pause(number - 1)
        raise StoreUnavailable("append kept losing races")

    def _attempts(self) -> Iterator[int]:
        deadline = time.monotonic() + self.store.write_deadline
        number = 0
        while time.monotonic() < deadline:
            if number:
                self.store.telemetry.count(Metric.CONDITIONAL_WRITE_RETRIES)
            yield number
            number += 1

    def _pause(self, number: int) -> None:
        """Full jitter: a random wait up to a cap that doubles each time (4 ms, 8 ms, ...
        256 ms), so writers that collided do not collide again in step."""
        self.store.sleep(random.uniform(0, min(0.256, 0.004 * 2**number)))

    # ---------------------------------------------------------------- what is known

    def _know(
        self, path: str, intent: AppendIntent, attempt: _Attempt
    ) -> _Known | AppendOutcome | _Retry:
        """The stream (and producer) state to decide on: found by the last attempt, else
        remembered, else read."""
        store = self.store
        producer_id = intent.producer.producer_id if intent.producer else None
        if attempt.known is not None:
            known, attempt.known = attempt.known, None
            return known
        if not attempt.guessed:
            attempt.guessed = True
            guess = store.recent.guess(path, producer_id)
            if guess is not None:
                return _Known(guess[0], guess[1], fresh=False)
        read = self._read(path, producer_id)
        return read[0] if isinstance(read, tuple) else read

    def _read(
        self, path: str, producer_id: str | None
    ) -> tuple[_Known, dict[str, Any] | None] | AppendOutcome | _Retry:
        """The stream and producer as stored now (and the producer's item)."""
        store = self.store
        read = store.get_for_write(path, producer_id)
        if read is None:
            return _Retry.THROTTLED
        raw, producer_item = read
        live = store.live(raw)
        if live is None:
            store.recent.forget(path)
            return AppendOutcome(Presence.NOT_FOUND)
        if live.soft_deleted:
            return AppendOutcome(Presence.GONE)
        producer = items.decode_producer(producer_item, live.incarnation)
        return _Known(live, producer, fresh=True), producer_item

    # ---------------------------------------------------------------- direct

    def _direct(
        self, path: str, intent: AppendIntent, payload: Payload, attempt: _Attempt
    ) -> AppendOutcome | _Retry:
        store = self.store
        known = self._know(path, intent, attempt)
        if not isinstance(known, _Known):
            return known
        info = known.info
        if not info.settled:
            joinable = reservable(intent) and info.counted
            if joinable and store.recent.hot(path):
                attempt.mode = _Mode.RESERVED  # others are reserving: join them
                attempt.known = known
                return _Retry.CONFLICT
            if not known.fresh:
                return _Retry.CONFLICT  # read it, then settle what is pending
            info = store.settler.settle(info, publish=True)
            if not info.settled:
                if joinable:
                    attempt.mode = _Mode.RESERVED
                    attempt.known = _Known(info, None, fresh=True)
                    return _Retry.CONFLICT
                # A close or a Stream-Seq append: new ranges are held off while the pending
                # ones are filled (or voided), or a busy stream would never be settled.
                if not info.closed:  # placed, or renewed while the pending ranges settle
                    attempt.held_until = self._hold(info, attempt.held_until)
                return _Retry.BUSY
            known = _Known(info, known.producer, fresh=True)
        decision = decide_append(_write_state(info, known.producer), intent)
        if not decision.commits:
            if not known.fresh:
                return _Retry.CONFLICT
            self._release(info, attempt)
            reported = decision.producer.state if decision.producer else None
            return AppendOutcome(Presence.FOUND, decision, info, reported)
        attempt.body = store.chunks.body_for(info.incarnation, payload, attempt.body)
        new_producer = decision.producer.state if decision.producer else None
        after = self._appended(info, intent, payload)
        chunks = []
        if attempt.body is not None:
            chunks.append(
                store.chunks.chunk_put(
                    info.incarnation, info.tail, payload, attempt.body, number=after.ranges
                )
            )
        producers: list[_ProducerWrite] = []
        if intent.producer is not None and new_producer is not None:
            claimed = intent.producer.producer_id
            producers.append((claimed, known.producer, new_producer, after.tail))
        try:
            self._commit_direct(
                info, after, chunks, producers, holding=attempt.held_until is not None
            )
        except Conflict as conflict:
            return self._direct_lost(path, intent, info, conflict, attempt)
        producer_id = intent.producer.producer_id if intent.producer else None
        store.recent.remember(after, producer_id, new_producer)
        return AppendOutcome(Presence.FOUND, decision, after, new_producer)

    def _direct_group(self, path: str, batch: Sequence[Waiting]) -> None:
        """Commit the direct appends waiting for this stream: together in one transaction
        when they can be (`_together`), else one after the other."""
        if len(batch) > 1:
            answers = self._together(path, [waiting.request for waiting in batch])
            if answers is not None:
                for waiting, answer in zip(batch, answers, strict=True):
                    waiting.answer = answer
                return
        for waiting in batch:
            try:
                waiting.answer = self._direct(path, *waiting.request)
            except BaseException as error:  # that append's failure, not the others'
                waiting.error = error

    def _together(
        self, path: str, requests: list[tuple[AppendIntent, Payload, _Attempt]]
    ) -> list[AppendOutcome] | None:
        """Group commit: decide each append in turn on the state the ones before it leave,
        and commit those that commit in one transaction; a refused one is answered on its
        own and fails none of the others. None when they cannot go together (the state is
        unknown or unsettled, a refusal would rest on a guess, or the commit lost a race):
        then each goes on its own."""
        store = self.store
        producer_ids = sorted({i.producer.producer_id for i, _, _ in requests if i.producer})
        known = self._know_together(path, producer_ids)
        if known is None or not known[0].settled or not known[0].counted:
            return None
        before, states, fresh = known
        state, producers = before, dict(states)
        answers: list[AppendOutcome] = []
        chunks: list[dict[str, Any]] = []
        ends: dict[str, int] = {}
        for intent, payload, attempt in requests:
            claimed = intent.producer.producer_id if intent.producer else None
            producer = producers.get(claimed) if claimed else None
            decision = decide_append(_write_state(state, producer), intent)
            if not decision.commits:
                if not fresh:
                    return None  # only a fresh read may refuse an append
                reported = decision.producer.state if decision.producer else None
                answers.append(AppendOutcome(Presence.FOUND, decision, state, reported))
                continue
            attempt.body = store.chunks.body_for(state.incarnation, payload, attempt.body)
            after = self._appended(state, intent, payload)
            if attempt.body is not None:
                chunks.append(
                    store.chunks.chunk_put(
                        state.incarnation, state.tail, payload, attempt.body, number=after.ranges
                    )
                )
            new_producer = decision.producer.state if decision.producer else None
            if claimed is not None and new_producer is not None:
                producers[claimed] = new_producer
                ends[claimed] = after.tail
            answers.append(AppendOutcome(Presence.FOUND, decision, after, new_producer))
            state = after
        for (_, _, attempt), answer in zip(requests, answers, strict=True):
            if not (answer.decision and answer.decision.commits):
                self._release(before, attempt)  # a refused append holds nothing off
        if state is before:
            return answers  # nothing commits: every answer is a refusal
        writes: list[_ProducerWrite] = [
            (pid, states.get(pid), producers[pid], end) for pid, end in ends.items()
        ]
        if len(chunks) + len(writes) + 2 > _MAX_ACTIONS:
            return None
        holding = any(attempt.held_until is not None for _, _, attempt in requests)
        try:
            self._commit_direct(before, state, chunks, writes, holding=holding)
        except Conflict:
            return None
        for pid in ends:
            store.recent.remember(state, pid, producers[pid])
        store.recent.remember(state, None, None)
        return answers

    def _know_together(
        self, path: str, producer_ids: list[str]
    ) -> tuple[StreamInfo, dict[str, ProducerState | None], bool] | None:
        """The stream and these producers' states: remembered if all are, else read in one
        call (None when the stream is absent or the read was throttled: each append then
        finds out on its own)."""
        store = self.store
        remembered: dict[str, ProducerState | None] = {}
        info: StreamInfo | None = None
        for producer_id in producer_ids or [None]:
            guess = store.recent.guess(path, producer_id)
            if guess is None:
                break
            info = guess[0]
            if producer_id is not None:
                remembered[producer_id] = guess[1]
        else:
            if info is not None:
                return info, remembered, False
        read = store.get_for_write_many(path, producer_ids)
        if read is None:
            return None
        raw, found = read
        live = store.live(raw)
        if live is None or live.soft_deleted:
            return None
        states = {pid: items.decode_producer(found.get(pid), live.incarnation) for pid in found}
        return live, {pid: states.get(pid) for pid in producer_ids}, True

    def _hold(self, info: StreamInfo, mine: float | None) -> float | None:
        """Hold new reservations off, or renew this append's hold (`mine`), for twice the
        void bound: long enough for a dead writer's range to be voided meanwhile, short
        enough that a holder that dies holds nothing up for long. The time it ends, or None
        when another append holds them off already (that hold serves this one as well)."""
        store = self.store
        now = store.clock()
        until = now + 2 * store.settler.void_after
        hold = requests.hold_reservations(store.table, info, now, until, mine)
        try:
            call(store.dynamodb.update_item, **hold)
        except Conflict:
            return None
        return until

    def _release(self, info: StreamInfo, attempt: _Attempt) -> None:
        """Lift this append's hold, if it placed one and no commit lifted it since."""
        if attempt.held_until is None:
            return
        until, attempt.held_until = attempt.held_until, None
        store = self.store
        with contextlib.suppress(Conflict):
            call(store.dynamodb.update_item, **requests.release_hold(store.table, info, until))

    def _direct_lost(
        self,
        path: str,
        intent: AppendIntent,
        assumed: StreamInfo,
        conflict: Conflict,
        attempt: _Attempt,
    ) -> _Retry:
        """A direct commit's condition failed: the stream as it is now (the failed condition
        shows it) is decided on next, without a read; another writer's commit makes this one
        reserve from now on."""
        store = self.store
        found = conflict.found(0) or conflict.item
        if found is None:
            return _Retry.CONFLICT
        current = store.live(items.decode_stream(path, found))
        if current is None or current.soft_deleted:
            return _Retry.CONFLICT  # the next attempt reads, and answers 404 or 410
        others_wrote = current.incarnation == assumed.incarnation and (
            current.reserved_end != assumed.reserved_end or current.ranges != assumed.ranges
        )
        if others_wrote and reservable(intent):
            store.recent.mark_hot(path)
            attempt.mode = _Mode.RESERVED
        if intent.producer is None:
            attempt.known = _Known(current, None, fresh=True)
        return _Retry.CONFLICT

    def _appended(self, info: StreamInfo, intent: AppendIntent, payload: Payload) -> StreamInfo:
        tail = info.tail + len(payload)
        number = info.ranges + (1 if len(payload) else 0)
        return replace(
            info,
            tail=tail,
            published=tail,
            reserved=tail,
            ranges=number,
            published_ranges=number,
            counted=True,
            closed=info.closed or intent.close,
            closed_by=intent.producer if intent.close else info.closed_by,
            last_stream_seq=intent.stream_seq or info.last_stream_seq,
            # Never before the access already recorded (another instance's clock, or ours).
            last_access=max(self.store.clock(), info.last_access),
        )

    def _commit_direct(
        self,
        before: StreamInfo,
        after: StreamInfo,
        chunks: list[dict[str, Any]],
        producers: list[_ProducerWrite],
        holding: bool = False,
    ) -> None:
        """One transaction taking the stream from `before` (exactly as decided on) to `after`,
        with the appends' chunks and the producers' new states (each conditioned on the
        state decided on)."""
        store = self.store
        update = requests.direct_commit(store.table, before, after, holding)
        actions: list[dict[str, Any]] = [{"Update": update}]
        actions += ({"Put": put} for put in chunks)
        actions += (
            {"Put": requests.producer_commit(store.table, before, *write)} for write in producers
        )
        closing = after.closed and not before.closed
        if marks(before.tail, after.tail, closing, store.seal_mark_bytes):
            actions.append(items.seal_mark_put(store.table, before, after.tail, store.clock()))
        if len(actions) == 1:
            call(store.dynamodb.update_item, **update)
        else:
            store.write(actions)

    # ---------------------------------------------------------------- reserved

    def _reserved(
        self, path: str, intent: AppendIntent, payload: Payload, attempt: _Attempt
    ) -> AppendOutcome | _AwaitPredecessor | _Retry:
        store = self.store
        claim = intent.producer
        if claim is not None and not attempt.producer_checked:
            attempt.producer_checked = True
            if not self.order.vouches(path, claim.producer_id, claim.epoch, claim.seq):
                checked = self._check_producer(path, intent, attempt)
                if checked is not None:
                    return checked
        known = self._know(path, intent, attempt)
        if not isinstance(known, _Known):
            return known
        info = known.info
        if not info.counted:
            attempt.mode = _Mode.DIRECT  # the first direct commit counts its ranges
            attempt.known = known
            return _Retry.CONFLICT
        # What the stream allows is decided here; what the producer allows, by the fill's
        # conditions (its state is not read: it is where its last request left it, anywhere).
        stream_only = replace(intent, producer=None)
        decision = decide_append(_write_state(info, None), stream_only)
        if not decision.commits:
            if not known.fresh:
                return _Retry.CONFLICT
            return AppendOutcome(Presence.FOUND, decision, info)
        attempt.body = store.chunks.body_for(info.incarnation, payload, attempt.body)
        try:
            reserved = self._reserve(info, len(payload))
        except Conflict as conflict:
            return self._reservation_refused(path, conflict, attempt)
        end, number = reserved.reserved_end, reserved.ranges
        store.recent.observe_range(path, reserved, number)
        start = end - len(payload)
        if store.clock() - reserved.reserved_at > store.settler.void_after / 2:
            # Too slow to fill it before readers may void it: give it up, reserve anew.
            store.settler.void_own(reserved, start, end, number)
            attempt.known = _Known(reserved, None, fresh=True)
            return _Retry.CONFLICT
        new_producer = _claimed_state(intent)
        try:
            self._fill(reserved, start, payload, attempt.body, number, intent)
        except Conflict as conflict:
            attempt.known = _Known(reserved, None, fresh=True)
            return self._fill_refused(reserved, start, end, number, intent, conflict, attempt)
        except Exception:
            # The fill's answer is lost (throttled, timed out): claiming the range void tells
            # whether it landed. It did: the append is done. It did not: nothing is stored,
            # and the range is voided at once rather than left pending for readers.
            if store.settler.void_own(reserved, start, end, number) is not Claim.FILLED:
                raise
        after = replace(reserved, tail=end)
        producer_id = intent.producer.producer_id if intent.producer else None
        store.recent.remember(after, producer_id, new_producer)
        if number % PUBLISH_EVERY == 0:
            # Best effort: the append is committed whatever happens here, and readers
            # settle what a failed publication leaves.
            with contextlib.suppress(Exception):
                store.settler.settle(reserved, publish=True)
        accepted = AppendDecision(
            Verdict.COMMIT,
            ProducerDecision(ProducerOutcome.ACCEPT, new_producer) if new_producer else None,
        )
        return AppendOutcome(Presence.FOUND, accepted, after, new_producer)

    def _check_producer(
        self, path: str, intent: AppendIntent, attempt: _Attempt
    ) -> AppendOutcome | _AwaitPredecessor | _Retry | None:
        """A producer request that this process's memory does not vouch for is decided on the
        producer's stored state before a range is reserved for it, so that refusing it costs a
        read, not a reservation, a void and a wait. None: it may be accepted (the fill's
        conditions decide, as for any other)."""
        claim = intent.producer
        assert claim is not None
        read = self._read(path, claim.producer_id)
        if not isinstance(read, tuple):
            return read
        known, producer_item = read
        decision = decide_append(_write_state(known.info, known.producer), intent)
        if decision.commits:
            attempt.known = known
            return None
        refusal = _refusal(known.info, decision, producer_item)
        if decision.verdict is Verdict.SEQUENCE_GAP and _pipelined(known.producer, claim):
            return _AwaitPredecessor(known.info, refusal)
        return refusal

    def _reserve(self, info: StreamInfo, length: int) -> StreamInfo:
        """Add `length` to the reserved end and one to the range count; the stream as it is
        just after (its reserved end is this range's end, its count this range's number)."""
        store = self.store
        request = requests.reserve_range(store.table, info, length, store.clock())
        response = call(store.dynamodb.update_item, **request)
        return items.decode_stream(info.path, response["Attributes"])

    def _reservation_refused(self, path: str, conflict: Conflict, attempt: _Attempt) -> _Retry:
        """The stream changed in a way that refuses reservations (closed, deleted, expired,
        re-created, or not counted yet): decide again on the stream as the condition saw it."""
        store = self.store
        if conflict.item is None:
            return _Retry.CONFLICT
        current = store.live(items.decode_stream(path, conflict.item))
        if current is None or current.soft_deleted:
            return _Retry.CONFLICT
        attempt.known = _Known(current, None, fresh=True)
        if not current.counted:
            attempt.mode = _Mode.DIRECT
        elif current.held_until > store.clock() and not current.closed:
            return _Retry.BUSY  # a close (or Stream-Seq append) waits to commit: after it
        return _Retry.CONFLICT

    def _fill(
        self,
        reserved: StreamInfo,
        start: int,
        payload: Payload,
        body: StoredBody | None,
        number: int,
        intent: AppendIntent,
    ) -> None:
        """The range's data, its claim and the producer's new state, together."""
        store = self.store
        assert body is not None  # a reservable append carries data
        inc = reserved.incarnation
        end = start + len(payload)
        actions: list[dict[str, Any]] = [
            {"Put": store.chunks.chunk_put(inc, start, payload, body, number=number)},
            requests.fill_claim(store.table, inc, number, store.clock()),
        ]
        if intent.producer is not None:
            actions.append({"Put": self._producer_expected(reserved, intent, start, end)})
        if marks(start, end, False, store.seal_mark_bytes):
            actions.append(items.seal_mark_put(store.table, reserved, end, store.clock()))
        store.write(actions)

    def _producer_expected(
        self, info: StreamInfo, intent: AppendIntent, start: int, end: int
    ) -> dict[str, Any]:
        """The producer's new state, conditioned on what accepting this request requires
        (`_requests.producer_fill`)."""
        claim = intent.producer
        assert claim is not None
        return requests.producer_fill(self.store.table, info, claim, start, end)

    def _fill_refused(
        self,
        reserved: StreamInfo,
        start: int,
        end: int,
        number: int,
        intent: AppendIntent,
        conflict: Conflict,
        attempt: _Attempt,
    ) -> AppendOutcome | _Retry:
        store = self.store
        if conflict.failed(0) or conflict.failed(1):
            return _Retry.CONFLICT  # voided by a reader that gave up on it: reserve anew
        if not conflict.failed(2) or intent.producer is None:
            # Not one of its conditions (a transaction conflict on DynamoDB's side): the
            # range is given up (or found filled after all), then reserved anew.
            if store.settler.void_own(reserved, start, end, number) is Claim.FILLED:
                return self._filled_after_all(reserved, end, intent)
            return _Retry.CONFLICT
        store.settler.void_own(reserved, start, end, number)
        found = conflict.found(2)
        state = items.decode_producer(found, reserved.incarnation)
        decision = decide_append(_write_state(reserved, state), intent)
        if decision.commits:
            return _Retry.CONFLICT  # its predecessor landed above this range: reserve anew
        refusal = _refusal(reserved, decision, found)
        gap = decision.verdict is Verdict.SEQUENCE_GAP and _pipelined(state, intent.producer)
        if gap and not attempt.waited_for_sequence:
            return _AwaitPredecessor(reserved, refusal)
        return refusal

    def _filled_after_all(
        self, reserved: StreamInfo, end: int, intent: AppendIntent
    ) -> AppendOutcome:
        new_producer = _claimed_state(intent)
        accepted = AppendDecision(
            Verdict.COMMIT,
            ProducerDecision(ProducerOutcome.ACCEPT, new_producer) if new_producer else None,
        )
        return AppendOutcome(Presence.FOUND, accepted, replace(reserved, tail=end), new_producer)

    def _await_predecessor(self, info: StreamInfo, claim: ProducerClaim) -> bool:
        """Whether the request before this producer request was stored within a short wait
        (a pipelining producer's requests that reached instances out of order)."""
        for pause in _predecessor_pauses():
            self.store.sleep(pause)
            if self._predecessor_stored(info, claim):
                return True
        return False

    async def _await_predecessor_async(
        self, info: StreamInfo, claim: ProducerClaim, run: Callable[..., Awaitable[Any]]
    ) -> bool:
        """`_await_predecessor`, waiting on the event loop."""
        for pause in _predecessor_pauses():
            await asyncio.sleep(pause)
            if await run(self._predecessor_stored, info, claim):
                return True
        return False

    def _predecessor_stored(self, info: StreamInfo, claim: ProducerClaim) -> bool:
        store = self.store
        response = call(
            store.dynamodb.get_item,
            TableName=store.table,
            Key=items.producer_key(info.path, claim.producer_id),
            ConsistentRead=True,
        )
        state = items.decode_producer(response.get("Item"), info.incarnation)
        return state is not None and (state.epoch, state.last_seq) >= (claim.epoch, claim.seq - 1)


# A producer's new state in a direct commit: its id, the state decided on, the new one, and
# where its data now ends.
_ProducerWrite = tuple[str, ProducerState | None, ProducerState, int]


def _write_state(info: StreamInfo, producer: ProducerState | None) -> WriteState:
    return WriteState(
        content_type=info.content_type,
        closed=info.closed,
        closed_by=info.closed_by,
        last_stream_seq=info.last_stream_seq,
        producer=producer,
    )


# Refusals decided by the producer's state, not the stream's.
_PRODUCER_VERDICTS = frozenset(
    {Verdict.DUPLICATE, Verdict.STALE_EPOCH, Verdict.EPOCH_NOT_AT_ZERO, Verdict.SEQUENCE_GAP}
)


def _pipelined(stored: ProducerState | None, claim: ProducerClaim | None) -> bool:
    """Whether a request refused for a gap is one a pipelining producer sends ahead of its
    predecessors (worth waiting for them), not one no pipeline explains."""
    return claim is not None and within_pipeline(stored, claim.epoch, claim.seq)


def _refusal(
    info: StreamInfo, decision: AppendDecision, producer_item: dict[str, Any] | None
) -> AppendOutcome:
    """A producer request refused on the stream's and its producer's stored state. One the
    producer's state refuses (a duplicate, a gap, an older epoch) is answered with where the
    producer's stored data ends, which is readable; one the stream refuses (closed, another
    content type), with the stream's tail."""
    reported = decision.producer.state if decision.producer else None
    by_producer = decision.verdict in _PRODUCER_VERDICTS
    stored_end = int(producer_item["pe"]["N"]) if producer_item and "pe" in producer_item else None
    tail = stored_end if by_producer and stored_end is not None else info.tail
    return AppendOutcome(Presence.FOUND, decision, replace(info, tail=tail), reported)


def _predecessor_pauses() -> Iterator[float]:
    """The pauses between looks for a predecessor: 10 ms doubling up to 100 ms, for at most
    `SEQUENCE_WAIT_SECONDS` in all."""
    deadline = time.monotonic() + SEQUENCE_WAIT_SECONDS
    pause = 0.01
    while time.monotonic() < deadline:
        yield pause
        pause = min(pause * 2, 0.1)


def _stored(outcome: AppendOutcome | None) -> ProducerState | None:
    """The producer's state an answered request found or left stored (None: not known). A
    request the stream refused (closed, another content type) whose producer part would have
    been accepted stored nothing: its decision's state is only what it would have stored."""
    if outcome is None or outcome.decision is None or outcome.decision.producer is None:
        return None
    decision = outcome.decision
    assert decision.producer is not None
    if (
        decision.verdict is Verdict.COMMIT
        or decision.producer.outcome is not ProducerOutcome.ACCEPT
    ):
        return outcome.producer
    return None


def _answer(step: AppendOutcome | _AwaitPredecessor) -> AppendOutcome:
    """An append without a producer never waits for a predecessor."""
    assert isinstance(step, AppendOutcome)
    return step


def _claimed_state(intent: AppendIntent) -> ProducerState | None:
    claim = intent.producer
    return None if claim is None else ProducerState(claim.epoch, claim.seq)
