"""The subscription benchmark, run small so it cannot rot: its figures are checked, not only
printed."""

from __future__ import annotations

import asyncio

from benchmarks.subscriptions import calls_per_append, wake_latency
from durable_streams_aws.infra.emulator import Emulator


def test_subscriptions_add_nothing_per_append_but_the_list_and_wake_each_subscription(
    emulator: Emulator,
) -> None:
    off = asyncio.run(calls_per_append(emulator, None, 8, 0.05))
    none = asyncio.run(calls_per_append(emulator, 0, 8, 0.05))
    two = asyncio.run(calls_per_append(emulator, 2, 8, 0.3))
    # With no subscription: no task and no delivery work; the append itself costs the same
    # but for the list's Query (at most one per 2 s of writes).
    assert none["queued"] == none["delivery"] == 0
    assert none["request"] - off["request"] <= 1 / 8 + 1e-9
    # With two: every append reached both (each caught up, checked by the benchmark itself),
    # through tasks and webhooks, and the append path's cost did not grow with them.
    assert two["webhooks"] >= 1 and two["queued"] >= 1
    assert two["request"] - off["request"] <= 2 / 8 + 1e-9


def test_the_wake_latency_is_measured_per_append(emulator: Emulator) -> None:
    latencies = asyncio.run(wake_latency(emulator, 3))
    assert len(latencies) == 3 and all(0 < latency < 5000 for latency in latencies)
