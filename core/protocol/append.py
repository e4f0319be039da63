"""The append decision: what a POST does to a stream, in the protocol's order of precedence."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .headers import ProducerClaim, media_type
from .producer import ProducerDecision, ProducerOutcome, ProducerState, decide_producer


@dataclass(frozen=True)
class WriteState:
    """What the decision needs to know of a stream (and of one producer on it)."""

    content_type: str
    closed: bool
    closed_by: ProducerClaim | None
    last_stream_seq: str | None
    producer: ProducerState | None = None


@dataclass(frozen=True)
class AppendIntent:
    """A parsed POST: the body is non-empty unless this is a close-only request."""

    content_type: str | None
    has_body: bool
    close: bool
    stream_seq: str | None = None
    producer: ProducerClaim | None = None


class Verdict(Enum):
    COMMIT = "commit"  # write data and/or closure
    DUPLICATE = "duplicate"  # a producer retry of something already committed
    ALREADY_CLOSED = "already_closed"  # close-only on a closed stream: idempotent success
    CLOSED = "closed"  # the stream is closed: nothing more may be appended
    CONTENT_TYPE_MISMATCH = "content_type_mismatch"
    STREAM_SEQ_REGRESSION = "stream_seq_regression"
    STALE_EPOCH = "stale_epoch"
    EPOCH_NOT_AT_ZERO = "epoch_not_at_zero"
    SEQUENCE_GAP = "sequence_gap"


_PRODUCER_REJECTIONS = {
    ProducerOutcome.STALE_EPOCH: Verdict.STALE_EPOCH,
    ProducerOutcome.EPOCH_NOT_AT_ZERO: Verdict.EPOCH_NOT_AT_ZERO,
    ProducerOutcome.SEQUENCE_GAP: Verdict.SEQUENCE_GAP,
}


@dataclass(frozen=True)
class AppendDecision:
    verdict: Verdict
    producer: ProducerDecision | None = None

    @property
    def commits(self) -> bool:
        return self.verdict is Verdict.COMMIT


def decide_append(state: WriteState, intent: AppendIntent) -> AppendDecision:
    producer = (
        decide_producer(state.producer, intent.producer) if intent.producer is not None else None
    )
    if state.closed:
        return AppendDecision(_closed_verdict(state, intent, producer), producer)
    if intent.has_body and media_type(intent.content_type or "") != media_type(state.content_type):
        return AppendDecision(Verdict.CONTENT_TYPE_MISMATCH, producer)
    if producer is not None:
        if producer.outcome is ProducerOutcome.DUPLICATE:
            return AppendDecision(Verdict.DUPLICATE, producer)
        if producer.outcome in _PRODUCER_REJECTIONS:
            return AppendDecision(_PRODUCER_REJECTIONS[producer.outcome], producer)
    if (
        intent.stream_seq is not None
        and state.last_stream_seq is not None
        and intent.stream_seq.encode() <= state.last_stream_seq.encode()
    ):
        return AppendDecision(Verdict.STREAM_SEQ_REGRESSION, producer)
    return AppendDecision(Verdict.COMMIT, producer)


def _closed_verdict(
    state: WriteState, intent: AppendIntent, producer: ProducerDecision | None
) -> Verdict:
    if intent.producer is not None and producer is not None:
        # The retry of the closing request, or of anything this producer had committed
        # before it, is a duplicate; any other producer write meets the closed stream.
        if intent.producer == state.closed_by or producer.outcome is ProducerOutcome.DUPLICATE:
            return Verdict.DUPLICATE
        return Verdict.CLOSED
    if intent.close and not intent.has_body:
        return Verdict.ALREADY_CLOSED
    return Verdict.CLOSED
