"""What a smoke check's observations mean: pure decisions, no I/O.

A shared cache in front of the server says how it answered in a response header: CloudFront in
`X-Cache` ("Hit from cloudfront", "RefreshHit from cloudfront", "Miss from cloudfront"), the
local nginx CDN in `X-Cache-Status` (HIT, MISS, EXPIRED, UPDATING, STALE, REVALIDATED, BYPASS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

CACHE_STATUS_HEADERS = ("x-cache", "x-cache-status")

# Answers a cache gave without asking the origin for them.
_SERVED_FROM_CACHE = {"hit", "refreshhit", "updating", "stale", "revalidated"}


class Outcome(Enum):
    PASSED = "ok"
    FAILED = "FAILED"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    detail: str


def passed(detail: str) -> Verdict:
    return Verdict(Outcome.PASSED, detail)


def failed(detail: str) -> Verdict:
    return Verdict(Outcome.FAILED, detail)


def skipped(detail: str) -> Verdict:
    return Verdict(Outcome.SKIPPED, detail)


def cache_status(headers: Mapping[str, str]) -> str | None:
    """The cache's own word for how it answered, lower-cased and without "from cloudfront";
    None when no cache stands in front (or it does not say)."""
    for name in CACHE_STATUS_HEADERS:
        value = headers.get(name)
        if value:
            return value.split(" from ")[0].strip().lower()
    return None


def from_cache(status: str | None) -> bool:
    return status is not None and status in _SERVED_FROM_CACHE


def repeated_read(first: str | None, second: str | None) -> Verdict:
    """Two identical reads of a closed stream: the second must come from the cache."""
    if second is None:
        return failed("no cache status header (X-Cache / X-Cache-Status): no CDN in front")
    if from_cache(second):
        return passed(f"first {first}, second {second}")
    return failed(f"the second identical read went to the origin too ({first}, then {second})")


def collapsed(statuses: Sequence[str | None], *, origin_budget: int = 1) -> Verdict:
    """Long-polls for the same key, answered by one append: at most `origin_budget` of them may
    reach the origin; the rest wait for its answer in the cache."""
    if not statuses:
        return failed("no long-poll was answered")
    if any(status is None for status in statuses):
        return failed("no cache status header (X-Cache / X-Cache-Status): no CDN in front")
    to_origin = [status for status in statuses if not from_cache(status)]
    summary = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses), key=str))
    if len(to_origin) > origin_budget:
        return failed(
            f"{len(to_origin)} of {len(statuses)} long-polls went to the origin ({summary}): "
            "the CDN does not collapse them"
        )
    return passed(f"{len(statuses)} long-polls, {len(to_origin)} at the origin ({summary})")


def refused_anonymous_write(status: int) -> Verdict:
    if status in (401, 403):
        return passed(f"{status} without a token")
    if 200 <= status < 300:
        return failed(f"an append without a token was accepted ({status}): anyone may write")
    return failed(f"an append without a token got {status}, expected 401 or 403")


def refused_direct_request(status: int) -> Verdict:
    if status == 403:
        return passed("403 from the origin without the CDN's secret")
    if 200 <= status < 300:
        return failed(f"the origin answered a direct request ({status}): it is not locked")
    return failed(f"a direct request to the origin got {status}, expected 403")
