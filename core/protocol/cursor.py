"""Long-poll and SSE cursors: they never go backwards, and followers converge on one.

A live reader echoes the last cursor it was given, so the cursor is part of a CDN's cache key.
The protocol requires a cursor strictly greater than the one echoed (so a reader never meets
the same cached response twice) and suggests an interval number plus random jitter. Jitter
keeps apart readers that should share: a reader who joins late starts from the current
interval while the others run ahead of it by their jitter, and from then on every append costs
one origin request per group of readers instead of one per stream.

Here a cursor is an anchor made of the reader's position in the stream and the clock:

    anchor = position * POSITION_WEIGHT + whole seconds since CURSOR_EPOCH
    cursor = anchor, or the echoed cursor + 1 when that is not below the anchor

Every reader handed the same data gets the same anchor (the same position, the same second),
however it got there. The anchor grows by at least POSITION_WEIGHT with every byte appended, so
any stragglers (readers served a few seconds apart) converge on the next append; on an idle
stream it grows by the long-poll timeout with every 204. Cursors are decimal integers; for any
stream under 90 TB they stay below 2**53, so JavaScript clients that parse them as numbers
compare them exactly. Nothing is ever clamped: a cursor strictly greater than the echo matters
more than its size.
"""

from __future__ import annotations

CURSOR_EPOCH = 1728432000.0  # 2024-10-09T00:00:00Z, the protocol's suggested epoch
# More than the seconds between readers answered separately for one append, so that the next
# append's anchor is ahead of every cursor they hold.
POSITION_WEIGHT = 100
# Longer echoes are not cursors of ours; they are ignored rather than exceeded.
_MAX_DIGITS = 40


def next_cursor(now: float, client_cursor: str | None, position: int) -> str:
    """The cursor for a live response that leaves its reader at `position`."""
    anchor = position * POSITION_WEIGHT + max(0, int(now - CURSOR_EPOCH))
    echoed = parse_cursor(client_cursor)
    if echoed is None or echoed < anchor:
        return str(anchor)
    return str(echoed + 1)


def parse_cursor(value: str | None) -> int | None:
    """An echoed cursor, or None when absent or not one of ours (such a cursor is ignored)."""
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > _MAX_DIGITS:
        return None
    return int(value)
