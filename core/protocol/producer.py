"""The idempotent-producer decision: state + claim -> accept, duplicate or reject."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .headers import ProducerClaim


@dataclass(frozen=True)
class ProducerState:
    epoch: int
    last_seq: int


class ProducerOutcome(Enum):
    ACCEPT = "accept"
    DUPLICATE = "duplicate"
    STALE_EPOCH = "stale_epoch"
    SEQUENCE_GAP = "sequence_gap"
    EPOCH_NOT_AT_ZERO = "epoch_not_at_zero"


@dataclass(frozen=True)
class ProducerDecision:
    outcome: ProducerOutcome
    # State after an accepted claim; the unchanged state otherwise (None for a new producer).
    state: ProducerState | None
    expected_seq: int | None = None


def decide_producer(state: ProducerState | None, claim: ProducerClaim) -> ProducerDecision:
    if state is None:
        if claim.seq == 0:
            return ProducerDecision(ProducerOutcome.ACCEPT, ProducerState(claim.epoch, 0))
        return ProducerDecision(ProducerOutcome.SEQUENCE_GAP, None, expected_seq=0)
    if claim.epoch < state.epoch:
        return ProducerDecision(ProducerOutcome.STALE_EPOCH, state)
    if claim.epoch > state.epoch:
        if claim.seq != 0:
            return ProducerDecision(ProducerOutcome.EPOCH_NOT_AT_ZERO, state)
        return ProducerDecision(ProducerOutcome.ACCEPT, ProducerState(claim.epoch, 0))
    if claim.seq <= state.last_seq:
        return ProducerDecision(ProducerOutcome.DUPLICATE, state)
    if claim.seq == state.last_seq + 1:
        return ProducerDecision(ProducerOutcome.ACCEPT, ProducerState(claim.epoch, claim.seq))
    return ProducerDecision(ProducerOutcome.SEQUENCE_GAP, state, expected_seq=state.last_seq + 1)
