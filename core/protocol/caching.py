"""ETags and Cache-Control: what a shared cache (CloudFront, nginx) may keep, and for how long.

Every response carries an explicit Cache-Control, decided here. The rules, and why:

- A response whose range can no longer change is cacheable for `max_age` (plus
  `stale-while-revalidate`): a catch-up chunk that stops short of the tail, anything that
  reaches the end of a closed stream, and a long-poll 200 (its reader moves on to
  `Stream-Next-Offset` and never takes "up to date" as the end). The lifetime is capped by the
  stream's own expiry, and it bounds how long a deleted or re-created stream's old data can
  still be served from an edge.
- A catch-up read that reaches the tail of an open stream is `no-store`: a writer reading
  right after its append must see it (read-your-writes), and a catch-up reader stops at
  `Stream-Up-To-Date`.
- A long-poll 204 (the wait ended with nothing new) is kept for `timeout_max_age` seconds, a
  second by default: long enough for a cache to hand it to every reader that was collapsed
  behind the one origin request (nginx lets waiters look every 500 ms), too short to matter
  otherwise. A reader served a stale 204 only polls again with the cursor it carries, a new
  cache key, so it never misses data or closure and never loops.
- Once expired, a 204 may still be served for `timeout_stale_while_revalidate` seconds (the
  long-poll timeout by default) while one request asks the origin again. Readers that lag
  reach a 204's key after it expired; without that allowance nginx sends each of them to the
  origin (its lock covers only new entries), and once data has arrived every one of them is a
  data read. Served the stale 204, they move on to the key the others went to, whose answer
  is cached already. The allowance covers one refresh, which is itself a long-poll, so it may
  take as long as the long-poll timeout; the first refresh replaces the 204, so no reader is
  served it stale after that.
- SSE responses (`no-cache, no-store`), `offset=now` reads, HEAD, writes and errors
  (`no-store`) are never kept: they describe the tail as it is now.

Collapsing is not caching, but it is not free of staleness either: CloudFront hands one origin
response to every identical request in flight, `no-store` or not, and that response may have
been produced before a later one of them arrived. A writer that must see its own append
through CloudFront compares `Stream-Next-Offset` with the offset the append was acknowledged at
and reads again, or reads from the Function URL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

NO_STORE = "no-store"
# The event-stream convention, which clients check for; both CDNs treat it as uncacheable.
EVENT_STREAM = "no-cache, no-store"


class ReadMode(Enum):
    CATCH_UP = "catch-up"
    LONG_POLL = "long-poll"
    SSE = "sse"


@dataclass(frozen=True)
class CacheRules:
    """The deployment's caching choices (settings `DS_CACHE_*`)."""

    visibility: str = "public"  # "private" keeps responses out of shared caches
    max_age: int = 60
    stale_while_revalidate: int = 300
    timeout_max_age: int = 1
    timeout_stale_while_revalidate: int = 15


@dataclass(frozen=True)
class ReadShape:
    """What a GET response says about the stream, as far as caching is concerned."""

    mode: ReadMode
    has_data: bool
    at_tail: bool  # the reader is left at the stream's tail
    closed: bool  # ...and the stream is closed there (Stream-Closed: true)
    from_now: bool = False  # offset=now: "the tail as of this request"


def read_cache_control(rules: CacheRules, shape: ReadShape, seconds_to_expiry: float | None) -> str:
    """Cache-Control for a GET response (and for the 304 that stands in for it)."""
    if shape.mode is ReadMode.SSE:
        return EVENT_STREAM
    if shape.from_now:
        return NO_STORE
    if shape.closed or not shape.at_tail:
        return _shared(rules, rules.max_age, rules.stale_while_revalidate, seconds_to_expiry)
    if shape.mode is ReadMode.LONG_POLL:
        if shape.has_data:
            return _shared(rules, rules.max_age, rules.stale_while_revalidate, seconds_to_expiry)
        return _shared(
            rules, rules.timeout_max_age, rules.timeout_stale_while_revalidate, seconds_to_expiry
        )
    return NO_STORE


def _shared(rules: CacheRules, max_age: int, swr: int, seconds_to_expiry: float | None) -> str:
    """Cacheable by `rules.visibility` caches, but never past the stream's own expiry."""
    if seconds_to_expiry is not None:
        remaining = math.floor(seconds_to_expiry)
        max_age = max(0, min(max_age, remaining))
        # A cache may serve for max-age plus stale-while-revalidate: keep the sum in bounds.
        swr = max(0, min(swr, remaining - max_age))
    if max_age <= 0:
        return NO_STORE
    return f"{rules.visibility}, max-age={max_age}, stale-while-revalidate={swr}"


def etag(incarnation: str, start: int, end: int, closed: bool, snapshot: bool = False) -> str:
    """Varies with the stream's incarnation, the range served and closure at that range (and
    whether a compacted stream's snapshot of the history below `start` comes first)."""
    first = f"s{start}" if snapshot else str(start)
    return f'"{incarnation}:{first}:{end}{":c" if closed else ""}"'


def etag_matches(if_none_match: str | None, current: str) -> bool:
    """If-None-Match uses the weak comparison: `W/"x"` matches `"x"`. CloudFront weakens the
    ETags of responses it compresses, so revalidations through it send weak tags."""
    if not if_none_match:
        return False
    candidates = {c.strip().removeprefix("W/") for c in if_none_match.split(",")}
    return "*" in candidates or current in candidates or current.strip('"') in candidates
