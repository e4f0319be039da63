"""Create-request comparison: is an existing stream the one this PUT asks for?"""

from __future__ import annotations

from dataclasses import dataclass

from .headers import media_type


@dataclass(frozen=True)
class StreamConfig:
    """The parts of a stream that an idempotent PUT must match."""

    content_type: str
    ttl_seconds: int | None
    expires_at: float | None
    closed: bool
    forked_from: str | None = None
    fork_position: int | None = None
    retention: str | None = None  # the policy's header value

    def matches(self, other: StreamConfig) -> bool:
        return (
            media_type(self.content_type) == media_type(other.content_type)
            and self.ttl_seconds == other.ttl_seconds
            and _same_instant(self.expires_at, other.expires_at)
            and self.closed == other.closed
            and self.forked_from == other.forked_from
            and self.fork_position == other.fork_position
            and self.retention == other.retention
        )


def _same_instant(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) < 0.001
