"""The sliding TTL: when a stream expires, and when a read must write to renew it.

The protocol says every read or write restarts the countdown. Writing on every read would cost a
DynamoDB write per read, so a read writes only once a *renewal window* has passed since the last
stored access. Reads inside the window are not recorded, so expiry is reckoned from the stored
access plus the TTL plus that window: a stream may expire up to one window late, never early.

Each stream keeps its own window (chosen at creation from the server's renewal fraction), so a
change of that setting never shortens a stream's life.
"""

from __future__ import annotations


def renewal_window(ttl_seconds: int, fraction: float) -> float:
    """Seconds after a recorded access during which reads need not be recorded."""
    return ttl_seconds * fraction


def sliding_expiry(last_access: float, ttl_seconds: int, window: float) -> float:
    """The moment a stream last recorded at `last_access` expires: never before the last read
    plus the TTL, since unrecorded reads happened within `window` of the record."""
    return last_access + ttl_seconds + window


def renewal_due(last_access: float, window: float, now: float) -> bool:
    """Whether a read at `now` must record itself to keep the never-early guarantee."""
    return now - last_access >= window


def oldest_live_access(now: float, ttl_seconds: int, window: float) -> float:
    """A stream whose recorded access is not after this moment has expired by `now` (the bound
    that conditional writes use to refuse expired streams)."""
    return now - ttl_seconds - window
