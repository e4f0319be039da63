"""The locked origin: the CDN adds a secret header to every request it sends the function, and
the function refuses requests without it, so nobody can go around the CDN (and its caching) to
the Function URL. `DS_ORIGIN_LOCK=reads` locks reads only and lets writers call the Function URL
directly; `all` locks everything.

Several values may be accepted at once, for rotation: `DS_ORIGIN_SECRET` lists them (comma-
separated), or the Secrets Manager secret `DS_ORIGIN_SECRET_ID` holds
`{"current": ..., "previous": ...}` (CloudFront sends `current`; the function also accepts
`previous` while CloudFront's edges move to the new value)."""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import ORIGIN_SECRET_PATTERN
from ..http import responses
from .keys import KeyConfigError, StoredValue

ORIGIN_SECRET_HEADER = "x-ds-origin-secret"
_READ_METHODS = {"GET", "HEAD"}
# Reveals nothing, and lets a load balancer or a test see the process is up.
_UNLOCKED_PATHS = {"/healthz"}


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


class OriginLock:
    def __init__(self, app: ASGIApp, lock: str, secrets: StoredValue[tuple[str, ...]]) -> None:
        self.app = app
        self.lock = lock
        self.secrets = secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] not in _UNLOCKED_PATHS
            and must_come_through_cdn(self.lock, scope["method"])
        ):
            presented = next(
                (
                    value.decode("latin-1")
                    for name, value in scope.get("headers", [])
                    if name == ORIGIN_SECRET_HEADER.encode()
                ),
                None,
            )
            secrets = (
                await run_in_threadpool(self.secrets.current)
                if self.secrets.stored
                else self.secrets.current()
            )
            if not came_through_cdn(presented, secrets):
                refusal = responses.error(
                    403, "forbidden", "this endpoint answers only requests through the CDN"
                )
                if scope["method"] == "HEAD":
                    refusal = responses.bodyless(refusal)
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def origin_secret_source(
    inline: str | None, secret_id: str | None, max_age: float
) -> StoredValue[tuple[str, ...]]:
    return StoredValue(parse_origin_secrets, inline=inline, secret_id=secret_id, max_age=max_age)
