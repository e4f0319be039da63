"""Retention policies: what a stream keeps, and where a retention run may cut it.

A stream is created with at most one policy (`Stream-Retention: max-age=86400; max-bytes=N`
or `Stream-Retention: compact`, or the deployment's default
for its path prefix): keep data younger than `max-age` seconds and/or the newest `max-bytes`
bytes, or `compact`: fold a JSON stream's State Protocol history into a snapshot. Retention
drops whole sealed segments only, so a cut always falls where a segment ends; the hot tail
(history not yet sealed) is never cut.

A cut is announced before it takes effect: reads of what it drops are cached no longer than
until it does, so no shared cache serves dropped data once a read of it answers 410 Gone
(`Cut`, `cache_seconds_left`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import ProtocolError, bad_request, quoted
from .headers import STREAM_RETENTION

_DIRECTIVE = re.compile(r"(max-age|max-bytes)=([1-9][0-9]{0,15})")
COMPACT = "compact"


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep data younger than `max_age` seconds and/or the newest `max_bytes`; or `compact`."""

    max_age: int | None = None
    max_bytes: int | None = None
    compact: bool = False

    def __post_init__(self) -> None:
        if self.compact and (self.max_age is not None or self.max_bytes is not None):
            raise ValueError("compaction takes no age or size")
        if not self.compact and self.max_age is None and self.max_bytes is None:
            raise ValueError("a retention policy needs an age, a size, or compaction")

    def header(self) -> str:
        """The canonical header value (what the stream item stores and responses echo)."""
        if self.compact:
            return COMPACT
        parts = []
        if self.max_age is not None:
            parts.append(f"max-age={self.max_age}")
        if self.max_bytes is not None:
            parts.append(f"max-bytes={self.max_bytes}")
        return "; ".join(parts)


def parse_retention(value: str | None) -> RetentionPolicy | None:
    """A `Stream-Retention` value; None when absent; 400 for anything malformed."""
    if value is None:
        return None
    # `;` between directives: a protocol header's value holds no comma (`single_value`).
    directives = [part.strip() for part in value.split(";")]
    if directives == [COMPACT]:
        return RetentionPolicy(compact=True)
    found: dict[str, int] = {}
    for directive in directives:
        match = _DIRECTIVE.fullmatch(directive)
        if match is None:
            raise bad_request(
                f"malformed {STREAM_RETENTION}: {quoted(value)} (expected max-age=SECONDS "
                "and/or max-bytes=BYTES, separated by ';', or compact)"
            )
        if match.group(1) in found:
            raise bad_request(f"{STREAM_RETENTION} names {match.group(1)} twice")
        found[match.group(1)] = int(match.group(2))
    return RetentionPolicy(found.get("max-age"), found.get("max-bytes"))


def stored_policy(value: str | None) -> RetentionPolicy | None:
    """The policy a stream item holds (written by this module, so never malformed)."""
    return parse_retention(value) if value else None


def parse_prefix_defaults(value: str) -> tuple[tuple[str, RetentionPolicy], ...]:
    """`DS_RETENTION_DEFAULTS`: `prefix=policy` entries separated by `,`, e.g.
    `logs/=max-age=604800; max-bytes=1073741824, state/=compact`. The longest matching
    prefix wins."""
    entries = []
    for entry in filter(None, (part.strip() for part in value.split(","))):
        prefix, sep, policy = entry.partition("=")
        try:
            parsed = parse_retention(policy.strip()) if sep else None
        except ProtocolError as exc:
            raise ValueError(f"{entry!r}: {exc.message}") from None
        if parsed is None:
            raise ValueError(f"expected prefix=policy, got {entry!r}")
        entries.append((prefix.strip(), parsed))
    return tuple(sorted(entries, key=lambda entry: -len(entry[0])))


def policy_for(
    path: str,
    asked: RetentionPolicy | None,
    defaults: Iterable[tuple[str, RetentionPolicy]],
) -> RetentionPolicy | None:
    """The policy a new stream gets: the one its create asked for, else its prefix's."""
    if asked is not None:
        return asked
    return next((policy for prefix, policy in defaults if path.startswith(prefix)), None)


@dataclass(frozen=True)
class SealedSpan:
    """A sealed segment of a stream: where it ends, and when it was sealed (None: sealed
    before seal times were recorded)."""

    end: int
    sealed_at: float | None


def retention_cut(
    policy: RetentionPolicy, spans: Sequence[SealedSpan], tail: int, now: float
) -> int:
    """Where the stream may start after a retention run: the end of the last sealed segment
    all of whose data the policy drops (0: nothing). Data is as old as its segment's seal
    time at most, so a segment sealed before `now - max_age` holds nothing younger; a
    segment without a seal time is dropped only with a later one that has it."""
    cut = 0
    for span in spans:
        too_old = (
            policy.max_age is not None
            and span.sealed_at is not None
            and span.sealed_at <= now - policy.max_age
        )
        too_far = policy.max_bytes is not None and tail - span.end >= policy.max_bytes
        if too_old or too_far:
            cut = max(cut, span.end)
    return cut


@dataclass(frozen=True)
class Cut:
    """A cut announced on a stream: from `effective_at` on, positions below `at` are gone."""

    at: int
    effective_at: float

    def effective(self, now: float) -> bool:
        return now >= self.effective_at


# Caches count whole seconds, and nginx keeps an entry to the end of the second it expires
# in: a response is kept a second less than the time left before a cut takes effect.
CACHE_CLOCK_MARGIN = 1.0


def cache_seconds_left(
    cut: Cut | None, start: int, decided_at: float, now: float | None = None
) -> float | None:
    """How long a response that begins at `start` may be kept by a shared cache, when the
    read was decided (`decided_at`) before a cut that drops it took effect; it is sent at
    `now` (None: no limit from retention)."""
    if cut is None or start >= cut.at or cut.effective(decided_at):
        return None
    sent = decided_at if now is None else now
    return max(0.0, cut.effective_at - sent - CACHE_CLOCK_MARGIN)
