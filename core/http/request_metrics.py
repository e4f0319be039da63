"""Per-request figures for operators: each stream operation's latency, appends refused by
status, and reads by the shape of their cache key and the caching they were answered with
(what a CDN in front can do with them). Measured around the app, so every answer counts,
errors included."""

from __future__ import annotations

import time
from collections.abc import Mapping
from enum import Enum
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..telemetry import Metric, Telemetry

CONTROL_SEGMENT = "__ds"  # the subscriptions' control API, not a stream


class Operation(Enum):
    APPEND = Metric.APPEND_LATENCY
    CATCH_UP = Metric.CATCH_UP_LATENCY
    LONG_POLL = Metric.LONG_POLL_LATENCY
    SSE = Metric.SSE_LATENCY
    CREATE = Metric.CREATE_LATENCY
    DELETE = Metric.DELETE_LATENCY
    HEAD = Metric.HEAD_LATENCY


_BY_METHOD = {
    "POST": Operation.APPEND,
    "PUT": Operation.CREATE,
    "DELETE": Operation.DELETE,
    "HEAD": Operation.HEAD,
}
_BY_LIVE_MODE = {"long-poll": Operation.LONG_POLL, "sse": Operation.SSE}


Query = Mapping[str, list[str]]


def parse_query(query_string: bytes) -> Query:
    return parse_qs(query_string.decode("latin-1"), keep_blank_values=True)


def operation_of(method: str, path: str, query: Query, base_path: str) -> Operation | None:
    """The stream operation a request asks for; None for anything else (the control API,
    listing, health checks, CORS preflights)."""
    prefix = base_path + "/"
    if not path.startswith(prefix) or path[len(prefix) :].startswith(CONTROL_SEGMENT):
        return None
    if method != "GET":
        return _BY_METHOD.get(method)
    live = query.get("live", [""])[0]
    return _BY_LIVE_MODE.get(live, Operation.CATCH_UP)


def read_shape(operation: Operation, query: Query) -> str:
    """The shape of a read's cache key: what decides whether readers can share an answer."""
    if operation is Operation.LONG_POLL:
        return "long-poll"
    if operation is Operation.SSE:
        return "sse"
    offset = query.get("offset", [""])[0]
    if offset == "now":
        return "now"
    return "from-start" if offset in ("", "-1") else "catch-up"


def cache_class(cache_control: str | None) -> str:
    """How a response may be cached: by shared caches, by the client only, or not at all."""
    if cache_control is None:
        return "none"
    value = cache_control.lower()
    if "no-store" in value:
        return "no-store"
    if "private" in value:
        return "private"
    return "shared" if "max-age" in value else "none"


class RequestMetrics:
    def __init__(self, app: ASGIApp, telemetry: Telemetry, base_path: str) -> None:
        self.app = app
        self.telemetry = telemetry
        self.base_path = base_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        operation = None
        query: Query = {}
        if scope["type"] == "http":
            if scope["method"] == "GET":  # only a read's query says what kind of read it is
                query = parse_query(scope.get("query_string", b""))
            operation = operation_of(scope["method"], scope["path"], query, self.base_path)
        if operation is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def measured(message: Message) -> None:
            if message["type"] == "http.response.start":
                self._record(operation, query, message, time.perf_counter() - started)
            await send(message)

        await self.app(scope, receive, measured)

    def _record(self, operation: Operation, query: Query, start: Message, seconds: float) -> None:
        telemetry = self.telemetry
        telemetry.count(operation.value, seconds * 1000)
        status = int(start["status"])
        if operation is Operation.APPEND and status >= 400:
            telemetry.count_by(Metric.APPENDS_REFUSED, {"Status": str(status)})
        elif operation in (Operation.CATCH_UP, Operation.LONG_POLL, Operation.SSE):
            cache_control = dict(start.get("headers", [])).get(b"cache-control")
            dimensions = {
                "Shape": read_shape(operation, query),
                "CacheControl": cache_class(cache_control and cache_control.decode("latin-1")),
            }
            telemetry.count_by(Metric.ORIGIN_READS, dimensions)
