"""When to try a request again, and after how long: pure decisions, no I/O."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded by default: at most `max_attempts` tries of one request (1 = never retry), with
    exponential backoff and full jitter between `base_delay` and `max_delay` seconds. A server's
    `Retry-After` is honoured, within `max_delay`."""

    max_attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 10.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_delay < 0 or self.max_delay < self.base_delay:
            raise ValueError("max_attempts >= 1 and 0 <= base_delay <= max_delay")

    def may_retry(self, attempt: int) -> bool:
        """Whether another try follows attempt number `attempt` (counted from 1)."""
        return attempt < self.max_attempts

    def delay(
        self, attempt: int, retry_after: str | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait after attempt number `attempt` failed."""
        asked = parse_retry_after(retry_after)
        if asked is not None:
            return min(asked, self.max_delay)
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return (rng or random).uniform(0, ceiling)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent or
    unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
