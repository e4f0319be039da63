"""Idempotent producers (PROTOCOL.md section 5.2.1): the validation table."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.protocol.headers import MAX_SAFE_INTEGER, ProducerClaim
from durable_streams_aws.core.protocol.producer import (
    ProducerDecision,
    ProducerOutcome,
    ProducerState,
    decide_producer,
)

ACCEPT = ProducerOutcome.ACCEPT
DUPLICATE = ProducerOutcome.DUPLICATE
STALE = ProducerOutcome.STALE_EPOCH
GAP = ProducerOutcome.SEQUENCE_GAP
NOT_AT_ZERO = ProducerOutcome.EPOCH_NOT_AT_ZERO


def _claim(epoch: int, seq: int, producer_id: str = "p") -> ProducerClaim:
    return ProducerClaim(producer_id, epoch, seq)


# (state, claim epoch, claim seq) -> (outcome, resulting state, expected seq)
TABLE = [
    # a new producer
    pytest.param(None, 0, 0, ACCEPT, ProducerState(0, 0), None, id="new-seq0"),
    pytest.param(None, 7, 0, ACCEPT, ProducerState(7, 0), None, id="new-epoch7-seq0"),
    pytest.param(None, 0, 1, GAP, None, 0, id="new-seq1"),
    pytest.param(None, 3, 5, GAP, None, 0, id="new-epoch3-seq5"),
    # stale epoch: fenced whatever the seq
    pytest.param(ProducerState(2, 4), 1, 0, STALE, ProducerState(2, 4), None, id="stale-seq0"),
    pytest.param(ProducerState(2, 4), 1, 5, STALE, ProducerState(2, 4), None, id="stale-seq5"),
    pytest.param(ProducerState(2, 4), 0, 4, STALE, ProducerState(2, 4), None, id="stale-dup"),
    pytest.param(ProducerState(2, 4), 1, 99, STALE, ProducerState(2, 4), None, id="stale-gap"),
    # epoch bump
    pytest.param(ProducerState(2, 4), 3, 0, ACCEPT, ProducerState(3, 0), None, id="bump-seq0"),
    pytest.param(
        ProducerState(2, 4), 10, 0, ACCEPT, ProducerState(10, 0), None, id="bump-jump-seq0"
    ),
    pytest.param(ProducerState(0, 0), 1, 0, ACCEPT, ProducerState(1, 0), None, id="bump-0-to-1"),
    pytest.param(ProducerState(2, 4), 3, 1, NOT_AT_ZERO, ProducerState(2, 4), None, id="bump-seq1"),
    pytest.param(
        ProducerState(2, 4), 3, 5, NOT_AT_ZERO, ProducerState(2, 4), None, id="bump-seq-next"
    ),
    pytest.param(
        ProducerState(2, 4), 3, 4, NOT_AT_ZERO, ProducerState(2, 4), None, id="bump-seq-last"
    ),
    # same epoch: duplicates
    pytest.param(ProducerState(2, 4), 2, 4, DUPLICATE, ProducerState(2, 4), None, id="dup-last"),
    pytest.param(ProducerState(2, 4), 2, 0, DUPLICATE, ProducerState(2, 4), None, id="dup-first"),
    pytest.param(ProducerState(2, 4), 2, 3, DUPLICATE, ProducerState(2, 4), None, id="dup-older"),
    pytest.param(ProducerState(0, 0), 0, 0, DUPLICATE, ProducerState(0, 0), None, id="dup-seq0"),
    # same epoch: the next seq
    pytest.param(ProducerState(2, 4), 2, 5, ACCEPT, ProducerState(2, 5), None, id="next"),
    pytest.param(ProducerState(0, 0), 0, 1, ACCEPT, ProducerState(0, 1), None, id="next-from-0"),
    # same epoch: a gap
    pytest.param(ProducerState(2, 4), 2, 6, GAP, ProducerState(2, 4), 5, id="gap-by-one"),
    pytest.param(ProducerState(2, 4), 2, 100, GAP, ProducerState(2, 4), 5, id="gap-large"),
    pytest.param(ProducerState(0, 0), 0, 2, GAP, ProducerState(0, 0), 1, id="gap-from-0"),
    # the 2^53-1 limit
    pytest.param(
        ProducerState(MAX_SAFE_INTEGER, MAX_SAFE_INTEGER - 1),
        MAX_SAFE_INTEGER,
        MAX_SAFE_INTEGER,
        ACCEPT,
        ProducerState(MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        None,
        id="max-safe-next",
    ),
    pytest.param(
        ProducerState(MAX_SAFE_INTEGER - 1, 9),
        MAX_SAFE_INTEGER,
        0,
        ACCEPT,
        ProducerState(MAX_SAFE_INTEGER, 0),
        None,
        id="max-safe-bump",
    ),
]


@pytest.mark.parametrize(("state", "epoch", "seq", "outcome", "new_state", "expected_seq"), TABLE)
def test_validation_table(
    state: ProducerState | None,
    epoch: int,
    seq: int,
    outcome: ProducerOutcome,
    new_state: ProducerState | None,
    expected_seq: int | None,
) -> None:
    decision = decide_producer(state, _claim(epoch, seq))
    assert decision == ProducerDecision(outcome, new_state, expected_seq)


@pytest.mark.parametrize(
    ("state", "epoch", "seq"),
    [
        (ProducerState(2, 4), 1, 0),
        (ProducerState(2, 4), 3, 1),
        (ProducerState(2, 4), 2, 4),
        (ProducerState(2, 4), 2, 9),
    ],
)
def test_anything_not_accepted_leaves_the_state_unchanged(
    state: ProducerState, epoch: int, seq: int
) -> None:
    decision = decide_producer(state, _claim(epoch, seq))
    assert decision.outcome is not ACCEPT
    assert decision.state == state


@pytest.mark.parametrize("producer_id", ["p", "another", ""])
def test_producer_id_does_not_affect_the_decision(producer_id: str) -> None:
    state = ProducerState(1, 1)
    for epoch, seq in [(0, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1)]:
        assert decide_producer(state, _claim(epoch, seq, producer_id)) == decide_producer(
            state, _claim(epoch, seq)
        )


def test_bootstrap_restart_and_zombie_fencing_flow() -> None:
    state: ProducerState | None = None
    for seq in range(5):
        decision = decide_producer(state, _claim(0, seq))
        assert decision.outcome is ACCEPT
        state = decision.state
    assert state == ProducerState(0, 4)

    # a retry of an earlier batch is a duplicate
    assert decide_producer(state, _claim(0, 2)).outcome is DUPLICATE

    # restart: epoch 1 from seq 0
    decision = decide_producer(state, _claim(1, 0))
    assert decision.outcome is ACCEPT
    state = decision.state
    assert state == ProducerState(1, 0)

    # the zombie at epoch 0 is fenced
    zombie = decide_producer(state, _claim(0, 5))
    assert zombie.outcome is STALE
    assert zombie.state is not None and zombie.state.epoch == 1

    # auto-claim: the client retries at the server's epoch + 1
    decision = decide_producer(state, _claim(zombie.state.epoch + 1, 0))
    assert decision.outcome is ACCEPT
    assert decision.state == ProducerState(2, 0)


def test_pipelined_sequence_accepts_each_next_seq() -> None:
    state = ProducerState(0, 0)
    for seq in range(1, 200):
        decision = decide_producer(state, _claim(0, seq))
        assert decision.outcome is ACCEPT
        assert decision.state == ProducerState(0, seq)
        state = decision.state


def test_decision_default_expected_seq_is_none() -> None:
    assert ProducerDecision(ACCEPT, None).expected_seq is None
