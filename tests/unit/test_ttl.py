"""The sliding TTL rule: reads that skip the write never make a stream expire early."""

from __future__ import annotations

import random

import pytest

from durable_streams_aws.core.protocol.ttl import (
    oldest_live_access,
    renewal_due,
    renewal_window,
    sliding_expiry,
)


@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.5, 1.0])
def test_expiry_is_never_before_the_last_read_plus_the_ttl(fraction: float) -> None:
    """Random reads, each recorded only when due, as the store does: the expiry reckoned from
    what is recorded is never before the last read plus the TTL, nor later than one window."""
    rng = random.Random(int(fraction * 100))
    for _ in range(300):
        ttl = rng.choice([1, 2, 10, 3600])
        window = renewal_window(ttl, fraction)
        recorded = now = 1_000.0
        last_read = now
        for _ in range(rng.randrange(1, 30)):
            now += rng.uniform(0, ttl * 1.2)
            if now >= sliding_expiry(recorded, ttl, window):
                break  # expired before this read: nothing more to renew
            last_read = now
            if renewal_due(recorded, window, now):
                recorded = now
        expiry = sliding_expiry(recorded, ttl, window)
        assert expiry >= last_read + ttl
        assert expiry <= last_read + ttl + window


def test_the_reported_case_expires_at_the_read_plus_the_ttl_at_the_earliest() -> None:
    window = renewal_window(10, 0.1)
    assert not renewal_due(0.0, window, 0.9)  # a read 0.9 s after the renewal writes nothing
    assert sliding_expiry(0.0, 10, window) >= 0.9 + 10


def test_conditional_writes_use_the_same_bound() -> None:
    window = renewal_window(10, 0.1)
    now = 50.0
    # A stream recorded exactly at the bound has expired by `now`; a moment later it has not.
    assert sliding_expiry(oldest_live_access(now, 10, window), 10, window) == now
