"""Fork rules that need no storage: expiry inheritance (protocol section 4.2)."""

from __future__ import annotations


def inherit_expiry(
    source_ttl: int | None,
    source_expires_at: float | None,
    requested_ttl: int | None,
    requested_expires_at: float | None,
) -> tuple[int | None, float | None]:
    """A fork that asks for its own TTL or Expires-At gets exactly that (even beyond the
    source's lifetime); one that asks for neither inherits the source's, whichever it has."""
    if requested_ttl is not None or requested_expires_at is not None:
        return requested_ttl, requested_expires_at
    return source_ttl, source_expires_at
