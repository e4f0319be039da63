"""`ProducerOrder`: a producer's requests to one stream taken in seq order in this process, the
waits on a thread or on the event loop, and which requests its memory vouches for."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from durable_streams_aws.core.protocol.producer import ProducerState
from durable_streams_aws.core.storage._producer_order import (
    ARRIVAL_WAIT_SECONDS,
    PIPELINE_DEPTH,
    ProducerOrder,
    within_pipeline,
)


@pytest.mark.parametrize(
    ("stored", "epoch", "seq", "expected"),
    [
        (None, 0, 0, True),  # a new producer's first request
        (None, 3, 0, True),
        (None, 0, 1, True),  # its second, sent before the first is stored
        (None, 0, PIPELINE_DEPTH, True),
        (None, 0, PIPELINE_DEPTH + 1, False),
        (ProducerState(0, 5), 0, 5, False),  # a duplicate
        (ProducerState(0, 5), 0, 4, False),
        (ProducerState(0, 5), 0, 6, True),
        (ProducerState(0, 5), 0, 6 + PIPELINE_DEPTH, True),
        (ProducerState(0, 5), 0, 7 + PIPELINE_DEPTH, False),
        (ProducerState(2, 5), 3, 0, True),  # a new epoch starts at 0
        (ProducerState(2, 5), 3, 1, False),
        (ProducerState(2, 5), 1, 0, False),  # an older epoch
        (ProducerState(2, 5), 1, 6, False),
    ],
)
def test_within_pipeline(
    stored: ProducerState | None, epoch: int, seq: int, expected: bool
) -> None:
    assert within_pipeline(stored, epoch, seq) is expected


def test_memory_vouches_for_first_requests_and_the_next_after_what_it_saw_stored() -> None:
    order = ProducerOrder()
    assert order.vouches("s", "p", 0, 0)
    assert not order.vouches("s", "p", 0, 1)  # it does not know where this producer is
    order.enter("s", "p", 0, 0, timeout=1)
    order.leave("s", "p", 0, 0, ProducerState(0, 0))
    assert order.vouches("s", "p", 0, 1) and order.vouches("s", "p", 1, 0)
    assert not order.vouches("s", "p", 0, 2)  # its predecessor has not been seen stored
    assert not order.vouches("s", "p", 0, 0) and not order.vouches("s", "p", 1, 1)
    assert not order.vouches("s", "q", 0, 1)  # another producer
    assert not order.vouches("t", "p", 0, 1)  # another stream
    order.learn("s", "p", ProducerState(0, 40))  # found stored by a refusal
    assert order.vouches("s", "p", 0, 41)
    order.learn("s", "p", ProducerState(0, 3))  # older than known: kept as it was
    assert not order.vouches("s", "p", 0, 4)


def test_a_request_whose_predecessor_is_in_flight_waits_for_it_to_leave() -> None:
    order = ProducerOrder()
    order.learn("s", "p", ProducerState(0, 0))
    order.enter("s", "p", 0, 1, timeout=5)  # seq 1 in flight
    entered: list[float] = []
    later = threading.Thread(target=lambda: (order.enter("s", "p", 0, 2, 5), entered.append(1)))
    later.start()
    time.sleep(ARRIVAL_WAIT_SECONDS + 0.2)  # past the arrival wait: it waits for seq 1
    assert not entered
    order.leave("s", "p", 0, 1, ProducerState(0, 1))
    later.join(5)
    assert entered


def test_a_request_whose_predecessor_has_not_arrived_waits_only_a_moment() -> None:
    order = ProducerOrder()
    order.learn("s", "p", ProducerState(0, 0))
    started = time.monotonic()
    order.enter("s", "p", 0, 2, timeout=5)
    waited = time.monotonic() - started
    assert ARRIVAL_WAIT_SECONDS - 0.01 <= waited < 5
    started = time.monotonic()
    order.enter("s", "p", 0, 2 + PIPELINE_DEPTH + 1, timeout=5)  # no pipeline: at once
    order.enter("s", "p", 1, 7, timeout=5)  # another epoch: at once
    assert time.monotonic() - started < ARRIVAL_WAIT_SECONDS


def test_waits_on_the_event_loop_wake_when_a_thread_answers_the_predecessor() -> None:
    order = ProducerOrder()
    order.learn("s", "p", ProducerState(0, 0))
    order.enter("s", "p", 0, 1, timeout=5)

    async def scenario() -> float:
        answering = threading.Timer(0.4, order.leave, ("s", "p", 0, 1, ProducerState(0, 1)))
        answering.start()
        started = time.monotonic()
        await asyncio.gather(*(order.enter_async("s", "p", 0, 2, 5) for _ in range(3)))
        return time.monotonic() - started

    waited = asyncio.run(scenario())
    assert 0.3 < waited < 4  # woken by the answer, not by the 5 s timeout
    assert not order._listeners  # nothing left listening
