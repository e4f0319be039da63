"""ETags and Cache-Control for reads."""

from __future__ import annotations

NO_STORE = "no-store"


def etag(incarnation: str, start: int, end: int, closed: bool) -> str:
    """Varies with the stream's incarnation, the range served and closure at that range."""
    return f'"{incarnation}:{start}:{end}{":c" if closed else ""}"'


def etag_matches(if_none_match: str | None, current: str) -> bool:
    if not if_none_match:
        return False
    # If-None-Match uses the weak comparison: W/"x" matches "x".
    candidates = {c.strip().removeprefix("W/") for c in if_none_match.split(",")}
    return "*" in candidates or current in candidates or current.strip('"') in candidates


def read_cache_control(
    visibility: str, max_age: int, stale_while_revalidate: int, seconds_to_expiry: float | None
) -> str:
    """Cacheable for shared readers, but never past the stream's own expiry."""
    if seconds_to_expiry is not None:
        max_age = max(0, min(max_age, int(seconds_to_expiry)))
        if max_age == 0:
            return NO_STORE
        # A cache may serve for max-age plus stale-while-revalidate: keep the sum in bounds.
        stale_while_revalidate = max(
            0, min(stale_while_revalidate, int(seconds_to_expiry) - max_age)
        )
    return f"{visibility}, max-age={max_age}, stale-while-revalidate={stale_while_revalidate}"
