"""The locked origin: the CDN adds a secret header to every request it sends the function, and
the function refuses requests without it, so nobody can go around the CDN (and its caching) to
the Function URL. `DS_ORIGIN_LOCK=reads` locks reads only and lets writers call the Function URL
directly; `all` locks everything. Several secrets may be accepted at once, for rotation."""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from ..http import responses

ORIGIN_SECRET_HEADER = "x-ds-origin-secret"
_READ_METHODS = {"GET", "HEAD"}
# Reveals nothing, and lets a load balancer or a test see the process is up.
_UNLOCKED_PATHS = {"/healthz"}


def came_through_cdn(presented: str | None, secrets: Sequence[str]) -> bool:
    if not presented:
        return False
    # Every secret is compared, in constant time, so timing tells nothing about any of them.
    matches = [hmac.compare_digest(presented.encode(), s.encode()) for s in secrets]
    return any(matches)


def must_come_through_cdn(lock: str, method: str) -> bool:
    return lock == "all" or (lock == "reads" and method in _READ_METHODS)


class OriginLock:
    def __init__(self, app: ASGIApp, lock: str, secrets: Sequence[str]) -> None:
        self.app = app
        self.lock = lock
        self.secrets = tuple(secrets)

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
            if not came_through_cdn(presented, self.secrets):
                refusal = responses.error(
                    403, "forbidden", "this endpoint answers only requests through the CDN"
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
