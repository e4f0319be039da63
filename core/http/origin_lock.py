"""The locked origin's middleware: a request that must come through the CDN
(`core.auth.origin.must_come_through_cdn`) and does not carry one of its secrets is refused
with 403 before any route sees it."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from ..auth.keys import StoredValue
from ..auth.origin import ORIGIN_SECRET_HEADER, came_through_cdn, must_come_through_cdn
from . import responses

# Reveals nothing, and lets a load balancer or a test see the process is up.
UNLOCKED_PATHS = frozenset({"/healthz"})
_SECRET_HEADER = ORIGIN_SECRET_HEADER.encode()


class OriginLock:
    def __init__(self, app: ASGIApp, lock: str, secrets: StoredValue[tuple[str, ...]]) -> None:
        self.app = app
        self.lock = lock
        self.secrets = secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] not in UNLOCKED_PATHS
            and must_come_through_cdn(self.lock, scope["method"])
        ):
            presented = next(
                (
                    value.decode("latin-1")
                    for name, value in scope.get("headers", [])
                    if name == _SECRET_HEADER
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
