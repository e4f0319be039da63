"""The idempotent producer's decisions against a model server that follows the protocol's
validation rules, with requests lost before and after the server, answers lost, requests
reordered in flight, and other producers fencing our epoch. Whatever happens, what the
producer reports delivered is in the stream exactly once and in order, and nothing it did not
report ends up there."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from durable_streams_aws.client._delivery import Answer, DeliveryTracker, ProducerBatch, Send


@dataclass
class ModelServer:
    """One producer's state on one stream, as PROTOCOL.md section 5.2.1 validates it."""

    epoch: int | None = None
    last_seq: int = -1
    log: list[bytes] = field(default_factory=list)

    def handle(self, epoch: int, seq: int, body: bytes) -> tuple[Answer, int | None]:
        if self.epoch is not None and epoch < self.epoch:
            return Answer.STALE_EPOCH, self.epoch
        if self.epoch is None or epoch > self.epoch:
            if seq != 0:
                return Answer.REFUSED, None  # 400: a new epoch starts at 0
            self.epoch, self.last_seq = epoch, 0
            self.log.append(body)
            return Answer.ACKED, None
        if seq <= self.last_seq:
            return Answer.ACKED, None  # 204: a duplicate of what is committed
        if seq == self.last_seq + 1:
            self.last_seq = seq
            self.log.append(body)
            return Answer.ACKED, None
        return Answer.SEQUENCE_GAP, None

    def fence(self, jump: int) -> None:
        """Another producer with the same id claims a newer epoch (and writes nothing under it:
        two producers that both claim one epoch are indistinguishable to any server, which is
        why auto-claim is opt-in)."""
        self.epoch = (self.epoch or 0) + jump
        self.last_seq = -1


@dataclass(frozen=True)
class Faults:
    lost_before: float = 0.0  # the request never reaches the server (and the client knows it)
    lost_after: float = 0.0  # the server commits, the answer is lost
    busy: float = 0.0  # a 5xx without doing anything (the client cannot know that)
    fence: float = 0.0  # another producer fences our epoch before a request arrives


def run(
    seed: int,
    faults: Faults,
    batches: int = 30,
    auto_claim: bool = True,
    in_flight: int = 4,
    attempts: int = 8,
) -> tuple[DeliveryTracker, ModelServer, list[ProducerBatch]]:
    rng = random.Random(seed)
    state = DeliveryTracker(auto_claim=auto_claim, max_in_flight=in_flight, max_attempts=attempts)
    server = ModelServer()
    made = [ProducerBatch(f"b{i}".encode(), 1) for i in range(batches)]
    to_enqueue = list(made)
    flying: list[Send] = []
    for _ in range(100_000):
        if to_enqueue and rng.random() < 0.5:
            state.enqueue(to_enqueue.pop(0))
        flying.extend(state.sendable())
        if not flying:
            if not to_enqueue and state.idle:
                return state, server, made
            continue
        sent = flying.pop(rng.randrange(len(flying)))  # in-flight requests overtake each other
        if rng.random() < faults.fence:
            server.fence(rng.randint(1, 3))
        roll = rng.random()
        if roll < faults.lost_before:
            state.answer(sent, Answer.UNDELIVERED)
            continue
        if roll < faults.lost_before + faults.busy:
            state.answer(sent, Answer.TRANSIENT)
            continue
        answer, server_epoch = server.handle(sent.epoch, sent.seq, sent.batch.body)
        if rng.random() < faults.lost_after:
            answer, server_epoch = Answer.TRANSIENT, None
        state.answer(sent, answer, server_epoch=server_epoch)
    raise AssertionError("the producer never settled")


def check_truthful(state: DeliveryTracker, server: ModelServer, made: list[ProducerBatch]) -> None:
    delivered = {b.body for b in state.delivered}
    lost = {b.body for b in state.lost}
    log = server.log
    assert len(log) == len(set(log)), "a batch was written twice"
    order = [b.body for b in made]
    assert log == sorted(log, key=order.index), "the stream is out of order"
    assert delivered <= set(log), "reported delivered but not in the stream"
    assert set(log) <= delivered | lost, "in the stream but never reported"
    assert delivered | lost == set(order), "a batch was neither delivered nor reported lost"
    assert not delivered & lost
    # Nothing after a gap: the stream holds a prefix of what was written, without holes.
    assert log == order[: len(log)] or all(b in lost for b in order[len(log) :]), log


SEEDS = range(150)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_clean_network_delivers_everything_in_order(seed: int) -> None:
    state, server, made = run(seed, Faults())
    check_truthful(state, server, made)
    assert server.log == [b.body for b in made] and state.lost == []


@pytest.mark.parametrize("seed", SEEDS)
def test_lost_requests_and_answers_are_retried_without_duplicates(seed: int) -> None:
    # Enough attempts that exhausting them (0.4**30) never happens here: everything arrives.
    faults = Faults(lost_before=0.15, lost_after=0.15, busy=0.1)
    state, server, made = run(seed, faults, attempts=30)
    check_truthful(state, server, made)
    assert server.log == [b.body for b in made], [b.lost_because for b in state.lost][:3]


@pytest.mark.parametrize("seed", SEEDS)
def test_fencing_with_auto_claim_neither_loses_nor_doubles(seed: int) -> None:
    state, server, made = run(seed, Faults(fence=0.05, lost_after=0.05))
    check_truthful(state, server, made)


@pytest.mark.parametrize("seed", SEEDS)
def test_fencing_without_auto_claim_reports_what_was_not_written(seed: int) -> None:
    state, server, made = run(seed, Faults(fence=0.05), auto_claim=False)
    check_truthful(state, server, made)


@pytest.mark.parametrize("seed", range(50))
def test_hopeless_networks_end_with_an_honest_report(seed: int) -> None:
    state, server, made = run(seed, Faults(lost_before=0.5, lost_after=0.3, fence=0.02))
    check_truthful(state, server, made)


def test_only_sequence_zero_goes_out_until_the_epoch_is_acknowledged() -> None:
    state = DeliveryTracker(max_in_flight=5)
    for i in range(3):
        state.enqueue(ProducerBatch(f"b{i}".encode(), 1))
    first = state.sendable()
    assert [s.seq for s in first] == [0]
    assert state.sendable() == []
    state.answer(first[0], Answer.ACKED)
    assert [s.seq for s in state.sendable()] == [1, 2]


def test_a_fence_waits_for_every_answer_of_the_old_epoch_before_claiming() -> None:
    state = DeliveryTracker(auto_claim=True, max_in_flight=5)
    batches = [ProducerBatch(f"b{i}".encode(), 1) for i in range(4)]
    for batch in batches:
        state.enqueue(batch)
    (zero,) = state.sendable()
    state.answer(zero, Answer.ACKED)
    one, two, three = state.sendable()
    state.answer(three, Answer.STALE_EPOCH, server_epoch=7)
    assert state.sendable() == []  # one and two may still have been committed
    state.answer(one, Answer.ACKED)  # it was: it must not be renumbered
    state.answer(two, Answer.STALE_EPOCH, server_epoch=7)
    (claim,) = state.sendable()
    assert (claim.epoch, claim.seq, claim.batch.body) == (8, 0, b"b2")
    state.answer(claim, Answer.ACKED)
    (rest,) = state.sendable()
    assert (rest.epoch, rest.seq, rest.batch.body) == (8, 1, b"b3")
    assert [b.body for b in state.delivered] == [b"b0", b"b1", b"b2"]


def test_an_answer_lost_around_a_fence_is_never_resent_under_the_new_epoch() -> None:
    state = DeliveryTracker(auto_claim=True, max_in_flight=5)
    for i in range(3):
        state.enqueue(ProducerBatch(f"b{i}".encode(), 1))
    (zero,) = state.sendable()
    state.answer(zero, Answer.ACKED)
    one, two = state.sendable()
    state.answer(two, Answer.STALE_EPOCH, server_epoch=3)
    state.answer(one, Answer.TRANSIENT)  # committed before the fence, or not: nobody knows
    assert state.sendable() == []
    assert {b.body for b in state.lost} == {b"b1", b"b2"}
    assert state.idle


def test_a_gap_nothing_outstanding_can_fill_is_not_waited_on_for_ever() -> None:
    state = DeliveryTracker(max_attempts=3)
    state.enqueue(ProducerBatch(b"only", 1))
    for _ in range(3):
        (send,) = state.sendable()
        state.answer(send, Answer.SEQUENCE_GAP)
    assert state.idle and [b.body for b in state.lost] == [b"only"]
