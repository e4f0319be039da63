"""The locked origin: the CDN adds a secret header to every request it sends the function, and
the function refuses requests without it, so nobody can go around the CDN (and its caching) to
the Function URL. `DS_ORIGIN_LOCK=reads` locks reads only and lets writers call the Function URL
directly; `all` locks everything.

Several values may be accepted at once, for rotation: `DS_ORIGIN_SECRET` lists them (comma-
separated), or the Secrets Manager secret `DS_ORIGIN_SECRET_ID` holds
`{"current": ..., "previous": ...}` (CloudFront sends `current`; the function also accepts
`previous` while CloudFront's edges move to the new value).

This module decides; the middleware that applies the decision to requests is
`core.http.origin_lock.OriginLock`."""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence

from ..config import ORIGIN_SECRET_PATTERN
from .keys import KeyConfigError, StoredValue

ORIGIN_SECRET_HEADER = "x-ds-origin-secret"
_READ_METHODS = {"GET", "HEAD"}


def parse_origin_secrets(text: str) -> tuple[str, ...]:
    """The accepted values: a JSON object's `current` and `previous`, or a comma-separated list."""
    text = text.strip()
    if text.startswith("{"):
        try:
            document = json.loads(text)
            values = [document["current"], document.get("previous") or ""]
        except (ValueError, KeyError, TypeError) as exc:
            raise KeyConfigError('the origin secret is {"current": ..., "previous": ...}') from exc
    else:
        values = text.split(",")
    secrets = tuple(v.strip() for v in values if isinstance(v, str) and v.strip())
    if not secrets or not all(ORIGIN_SECRET_PATTERN.fullmatch(v) for v in secrets):
        raise KeyConfigError("an origin secret is 16 or more letters, digits, or -._~+/=")
    return secrets


def came_through_cdn(presented: str | None, secrets: Sequence[str]) -> bool:
    if not presented:
        return False
    # Every secret is compared, in constant time, so timing tells nothing about any of them.
    matches = [hmac.compare_digest(presented.encode(), s.encode()) for s in secrets]
    return any(matches)


def must_come_through_cdn(lock: str, method: str) -> bool:
    return lock == "all" or (lock == "reads" and method in _READ_METHODS)


def origin_secret_source(
    inline: str | None, secret_id: str | None, max_age: float
) -> StoredValue[tuple[str, ...]]:
    return StoredValue(parse_origin_secrets, inline=inline, secret_id=secret_id, max_age=max_age)
