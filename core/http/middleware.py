"""Headers every response carries: browser security headers (protocol section 12.7), and a
Cache-Control where the handler set none (a CDN applies its default TTL to a response without
one; routing errors and CORS preflights are answered outside the stream handlers).

A stream's content is whatever its writer sent, under the content type the writer chose, and is
served from the API's (and the CDN's) origin: a `text/html` or `image/svg+xml` stream would run
its script there if a browser navigated to it. Every response therefore carries a sandboxing
Content-Security-Policy (no script, no plugins, no same-origin access, nothing loaded), and one
whose type a browser renders actively is also marked as a download."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..protocol.caching import NO_STORE
from ..protocol.headers import is_active_content
from . import responses

logger = logging.getLogger("dsaws")

NO_STORE_BYTES = NO_STORE.encode()
CONTENT_SECURITY_POLICY = b"sandbox; default-src 'none'"
DEFAULT_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-resource-policy", b"cross-origin"),
    (b"content-security-policy", CONTENT_SECURITY_POLICY),
    (b"cache-control", NO_STORE_BYTES),
]
AS_DOWNLOAD = (b"content-disposition", b"attachment")


class DefaultHeaders:
    """`cacheable_extra`: headers for responses a cache may keep and serve to later
    requests (not marked `no-store`), which may come from anyone."""

    def __init__(self, app: ASGIApp, cacheable_extra: list[tuple[str, str]] | None = None) -> None:
        self.app = app
        self.defaults = DEFAULT_HEADERS
        self.cacheable_extra = [
            (name.lower().encode(), value.encode()) for name, value in cacheable_extra or []
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                present = {name.lower(): value for name, value in headers}
                defaults = self.defaults
                if present.get(b"cache-control", NO_STORE_BYTES) != NO_STORE_BYTES:
                    defaults = [*defaults, *self.cacheable_extra]
                extra = [(k, v) for k, v in defaults if k not in present]
                if _active(present):
                    extra.append(AS_DOWNLOAD)
                message["headers"] = [*headers, *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _active(present: dict[bytes, bytes]) -> bool:
    """Whether a response with these headers is of a type a browser would run, and does not
    say already how it is to be shown."""
    content_type = present.get(b"content-type")
    if content_type is None or b"content-disposition" in present:
        return False
    return is_active_content(content_type.decode("latin-1"))


REQUEST_ID_HEADER = b"x-request-id"


class RequestId:
    """Names each request in a response header, `X-Request-Id`, and in its access log line:
    Lambda's own request id (which Powertools puts in every log line of the invocation), or
    under `dsaws serve` a fresh one. A response a CDN keeps carries the id of the request it
    answered first; CloudFront names each viewer request in `X-Amz-Cf-Id`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        context = scope.get("aws.context")  # Mangum's: the Lambda invocation's context
        request_id = getattr(context, "aws_request_id", None) or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        header = (REQUEST_ID_HEADER, request_id.encode("latin-1"))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        await self.app(scope, receive, send_with_id)


class ErrorBoundary:
    """A request whose handler failed unexpectedly gets a 500 in the shape of every other
    error, here, inside the middleware that name, measure and log requests: Starlette's own
    last-resort answer is made outside all of them, so it would carry no request id and count
    in no metric. The failure is logged with its traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            if started:  # too late for an answer of our own: the server closes the connection
                raise
            logger.exception("%s %s failed", scope["method"], scope["path"])
            answer = responses.error(500, "internal", "the server failed to answer; retry")
            if scope["method"] == "HEAD":
                answer = responses.bodyless(answer)
            await answer(scope, receive, send)


class AccessLog:
    """One structured log line per request: method, stream path, status and latency."""

    def __init__(self, app: ASGIApp, logger: logging.Logger) -> None:
        self.app = app
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            self.logger.info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "latency_ms": round((time.perf_counter() - started) * 1000, 2),
                    "request_id": scope.get("state", {}).get("request_id"),
                },
            )


class RequestActivity:
    """When the server last worked on a request (one began or ended, or a response sent some
    of its body), how many are in flight, and the event loop that serves them, for work that
    should keep out of the requests' way (`dsaws serve`'s sealer and collector on the embedded
    emulator). A long-poll or an SSE stream that only waits is not work."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.in_flight = 0
        self.loop: asyncio.AbstractEventLoop | None = None  # known from the first request on
        # Called on the event loop whenever the last request in flight has ended.
        self.on_idle: Callable[[], None] | None = None

    def idle_for(self) -> float:
        return time.monotonic() - self._last

    @property
    def last_worked(self) -> float:
        """When a request last began, ended or sent some of its body (`time.monotonic()`)."""
        return self._last

    def working(self, patience: float) -> bool:
        """Whether a request is in flight and the server worked on one less than `patience`
        seconds ago: past that, what is in flight only waits (a long-poll, an SSE stream)."""
        return self.in_flight > 0 and self.idle_for() < patience

    def around(self, app: ASGIApp) -> ASGIApp:
        async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return

            async def sending(message: Message) -> None:
                self._last = time.monotonic()
                await send(message)

            if self.loop is None:
                self.loop = asyncio.get_running_loop()
            self._last = time.monotonic()
            self.in_flight += 1
            try:
                await app(scope, receive, sending)
            finally:
                self._last = time.monotonic()
                self.in_flight -= 1
                if not self.in_flight and self.on_idle is not None:
                    self.on_idle()

        return recorded
