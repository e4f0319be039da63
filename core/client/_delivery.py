"""The idempotent producer's decisions, without I/O: which batch to send next and under which
(epoch, sequence), and what each answer means for every batch not yet acknowledged.

The invariants it keeps, and that the tests check against a model server under random faults:

- a batch is reported delivered only after the server acknowledged it (200, or 204 for a
  duplicate of what it had already committed);
- a batch that failed transiently is sent again with the same epoch and sequence, so the server
  deduplicates it if the earlier attempt had in fact landed;
- once a batch is given up (retries exhausted, or refused for good), every later batch of the
  same epoch that is not already on its way is given up with it: the server would refuse it as
  a sequence gap. A batch given up after retries may still have landed (its answers were lost):
  if a later batch of its epoch is then acknowledged, the server's rule (a sequence is accepted
  only after the one before it) proves it was, and it counts as delivered after all;
- a stale epoch (403) is claimed once (single flight). Nothing new is sent until every request
  of the fenced epoch has been answered: an earlier one may have been committed before the
  fence, and renumbering it would write it twice. Then the batches the server refused are
  renumbered, in order, under the next epoch, whose sequence 0 goes out alone; the rest follow
  once it is acknowledged. A batch whose answer was lost around the fence cannot be confirmed
  either way: it is given up (with everything after it), never resent under the new epoch;
- after a batch is given up nothing more is sent (what follows would leave a hole in the
  stream): later batches are reported lost too, until the caller starts a new producer.

Auto-claim cannot tell apart two producers that claim the same epoch at once (no server can):
like the protocol, it is opt-in, for one producer per id at a time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum


class Answer(Enum):
    ACKED = "acked"  # 200, or 204: committed now or before
    UNDELIVERED = "undelivered"  # never reached the server (no connection, 429): send again
    TRANSIENT = "transient"  # no answer, 5xx: it may have been committed; send it again
    STALE_EPOCH = "stale-epoch"  # 403 with the server's epoch
    SEQUENCE_GAP = "sequence-gap"  # 409: an earlier sequence has not arrived (yet)
    REFUSED = "refused"  # anything else: this batch will never be accepted


@dataclass
class ProducerBatch:
    """Messages an idempotent producer sends together in one append (not a read's `Batch`);
    `seq` and `epoch` are set when it is numbered."""

    body: bytes
    messages: int
    close: bool = False  # this request also closes the stream
    epoch: int = -1
    seq: int = -1
    attempts: int = 0
    lost_because: str | None = None
    # Refused as a sequence gap: it waits until every earlier batch has been answered.
    parked: bool = False
    # An attempt may have been committed without our hearing of it: only an acknowledgement
    # under the same epoch can settle it; a refusal under a fence cannot.
    maybe_committed: bool = False


@dataclass(frozen=True)
class Send:
    batch: ProducerBatch
    epoch: int
    seq: int


@dataclass
class DeliveryTracker:
    """Every batch of one producer from queued to delivered or lost: the (epoch, sequence) it
    goes under, when it may go, and what each answer means for it and for those after it. The
    client's side of idempotent appends; the server keeps its own per-producer record."""

    epoch: int = 0
    auto_claim: bool = False
    max_in_flight: int = 5
    max_attempts: int = 8
    next_seq: int = 0
    waiting: deque[ProducerBatch] = field(default_factory=deque)  # numbered, not in flight
    in_flight: dict[int, ProducerBatch] = field(default_factory=dict)  # seq -> batch, current epoch
    delivered: list[ProducerBatch] = field(default_factory=list)
    lost: list[ProducerBatch] = field(default_factory=list)
    # Until the server has acknowledged something in this epoch, only sequence 0 may be out: a
    # later one overtaking it would be refused (a new epoch must start at 0).
    claiming: bool = True
    fence: int | None = None  # the server's epoch, while the fenced epoch's answers come in
    refused: list[ProducerBatch] = field(default_factory=list)  # fenced, so never committed

    # ---------------------------------------------------------------- queueing

    def enqueue(self, batch: ProducerBatch) -> None:
        batch.epoch, batch.seq = self.epoch, self.next_seq
        self.next_seq += 1
        if self.lost:
            first = min(self.lost, key=lambda b: (b.epoch, b.seq))
            batch.lost_because = f"the producer stopped after batch {first.seq} was given up"
            self.lost.append(batch)
            return
        self.waiting.append(batch)

    def sendable(self) -> list[Send]:
        """The requests to send now: in sequence order, within the in-flight window; while an
        epoch is being claimed, only its sequence 0."""
        sends = []
        if self.fence is not None:
            return []  # waiting for the fenced epoch's last answers
        limit = 1 if self.claiming else self.max_in_flight
        while self.waiting and len(self.in_flight) < limit:
            batch = self.waiting[0]
            if batch.parked and any(seq < batch.seq for seq in self.in_flight):
                break  # it (and everything after it) would only meet the gap again
            self.waiting.popleft()
            batch.parked = False
            batch.attempts += 1
            self.in_flight[batch.seq] = batch
            sends.append(Send(batch, batch.epoch, batch.seq))
        return sends

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.in_flight

    # ---------------------------------------------------------------- answers

    def answer(
        self,
        sent: Send,
        answer: Answer,
        *,
        server_epoch: int | None = None,
        server_seq: int | None = None,
        reason: str = "",
    ) -> None:
        if sent.epoch != self.epoch or self.in_flight.get(sent.seq) is not sent.batch:
            return  # an answer to a request of an epoch we have left behind
        batch = self.in_flight.pop(sent.seq)
        if answer is Answer.ACKED and server_seq is not None and server_seq >= self.next_seq:
            # The server holds sequences of this epoch that we never sent: another session of
            # this producer used the epoch before, and our batch was taken for its duplicate.
            self._lose_from(
                batch,
                f"producer epoch {self.epoch} was already used (the server is at sequence "
                f"{server_seq}): start with a higher epoch, or auto-claim",
            )
        elif self.fence is not None:
            self._while_fenced(batch, answer)
        elif answer is Answer.ACKED:
            self._deliver(batch)
            self.claiming = False
        elif answer is Answer.STALE_EPOCH:
            self._stale(batch, server_epoch)
        elif answer is Answer.SEQUENCE_GAP:
            self._gap(batch)
        elif answer is Answer.TRANSIENT:
            batch.maybe_committed = True
            self._again(batch, reason or "no answer")
        elif answer is Answer.UNDELIVERED:
            self._again(batch, reason or "not delivered")
        else:
            self._lose_from(batch, reason or "refused by the server")

    def _deliver(self, batch: ProducerBatch) -> None:
        """Acknowledged: it, and every earlier batch of its epoch, is in the stream."""
        self.delivered.append(batch)
        proven = [b for b in self.lost if b.epoch == batch.epoch and b.seq < batch.seq]
        for earlier in proven:
            earlier.lost_because = None
            self.lost.remove(earlier)
            self.delivered.append(earlier)

    def _earlier_given_up(self, batch: ProducerBatch) -> bool:
        return any(b.epoch == batch.epoch and b.seq < batch.seq for b in self.lost)

    def _again(self, batch: ProducerBatch, reason: str) -> None:
        if self._earlier_given_up(batch):
            self._lose_from(batch, "an earlier batch was given up")
        elif batch.attempts >= self.max_attempts:
            self._lose_from(batch, f"{reason}, after {batch.attempts} attempts")
        else:
            self._resend(batch)

    def _gap(self, batch: ProducerBatch) -> None:
        """An earlier sequence is still on its way (pipelined requests can overtake each
        other): send this one again once the earlier ones have been answered. Waiting for
        them is not a failure of this batch, so it costs no attempt."""
        if self._earlier_given_up(batch):
            self._lose_from(batch, "an earlier batch was given up")
            return
        earlier_outstanding = any(
            b.seq < batch.seq for b in [*self.in_flight.values(), *self.waiting]
        )
        if not earlier_outstanding:
            # Nothing of ours can fill the gap: it costs attempts like any other failure.
            self._again(batch, "sequence gap that nothing outstanding can fill")
            return
        batch.attempts -= 1
        batch.parked = True
        self._resend(batch)

    def _stale(self, batch: ProducerBatch, server_epoch: int | None) -> None:
        if not self.auto_claim or server_epoch is None:
            self._lose_from(batch, f"fenced by producer epoch {server_epoch}")
            return
        self.fence = server_epoch
        self._fenced_out(batch)
        self._claim_when_answered()

    def _while_fenced(self, batch: ProducerBatch, answer: Answer) -> None:
        if answer is Answer.ACKED:
            self._deliver(batch)  # committed before the fence
        elif answer in (Answer.STALE_EPOCH, Answer.SEQUENCE_GAP, Answer.UNDELIVERED):
            self._fenced_out(batch)
        else:
            batch.maybe_committed = True
            self._fenced_out(batch)
        self._claim_when_answered()

    def _fenced_out(self, batch: ProducerBatch) -> None:
        """Refused under the fence: never committed, unless an earlier attempt may have been."""
        if batch.maybe_committed:
            self._lose_from(batch, "an attempt may have been committed before the fence")
        else:
            self.refused.append(batch)

    def _claim_when_answered(self) -> None:
        """Once no request of the fenced epoch is out: renumber what the server refused (and
        what never left), up to the first batch that cannot be confirmed, under the next epoch."""
        if self.in_flight or self.fence is None:
            return
        pending = sorted([*self.refused, *self.waiting], key=lambda b: b.seq)
        first_unknown = min((b.seq for b in self.lost if b.epoch == self.epoch), default=None)
        self.epoch = max(self.epoch, self.fence) + 1
        self.fence, self.refused, self.waiting = None, [], deque()
        self.next_seq = 0
        self.claiming = True
        for item in pending:
            if first_unknown is not None and item.seq > first_unknown:
                item.lost_because = f"batch {first_unknown} before it could not be confirmed"
                self.lost.append(item)
                continue
            item.attempts = 0
            self.enqueue(item)

    def _resend(self, batch: ProducerBatch) -> None:
        """Back into the queue at its place in sequence order."""
        position = next((i for i, b in enumerate(self.waiting) if b.seq > batch.seq), None)
        if position is None:
            self.waiting.append(batch)
        else:
            self.waiting.insert(position, batch)

    def _lose_from(self, batch: ProducerBatch, reason: str) -> None:
        """Give this batch up, and every later one of its epoch not yet on its way (those on
        their way are decided by their own answers)."""
        batch.lost_because = reason
        self.lost.append(batch)
        for other in [b for b in self.waiting if b.seq > batch.seq]:
            other.lost_because = f"batch {batch.seq} before it was given up ({reason})"
            self.lost.append(other)
        self.waiting = deque(b for b in self.waiting if b.lost_because is None)
