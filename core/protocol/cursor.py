"""Long-poll cursors: interval numbers that never go backwards, with deterministic jitter.

Every follower of the same stream position computes the same cursor, so a CDN sees one cache
key per position and interval and can collapse their requests into one origin request.
"""

from __future__ import annotations

import hashlib
import math

CURSOR_EPOCH = 1728432000.0  # 2024-10-09T00:00:00Z
INTERVAL_SECONDS = 20
_MAX_JITTER_SECONDS = 3600


def current_interval(now: float, interval: int = INTERVAL_SECONDS) -> int:
    return int((now - CURSOR_EPOCH) // interval)


def next_cursor(
    now: float, client_cursor: str | None, stream_key: str, interval: int = INTERVAL_SECONDS
) -> str:
    """The cursor for a live response: the current interval, or past the client's cursor."""
    current = current_interval(now, interval)
    echoed = _parse_cursor(client_cursor)
    if echoed is None or echoed < current:
        return str(current)
    digest = hashlib.sha256(f"{stream_key}|{echoed}".encode()).digest()
    jitter_seconds = 1 + int.from_bytes(digest[:4], "big") % _MAX_JITTER_SECONDS
    return str(echoed + max(1, math.ceil(jitter_seconds / interval)))


def _parse_cursor(value: str | None) -> int | None:
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > 18:
        return None
    return int(value)
