"""The FastAPI application: routes map HTTP onto the store through the protocol helpers."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from .config import Settings
from .http import responses
from .http.listing import list_streams
from .http.middleware import AccessLog, DefaultHeaders
from .http.streams import StreamEndpoints
from .http.wakeups import Wakeups
from .protocol.errors import ProtocolError
from .protocol.paths import parse_stream_path
from .storage import StoreUnavailable, StreamStore
from .telemetry import Telemetry

logger = logging.getLogger("dsaws")
_METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS"]


def create_app(
    settings: Settings,
    store: StreamStore,
    telemetry: Telemetry | None = None,
    access_log: logging.Logger | None = None,
) -> FastAPI:
    app = FastAPI(title="Durable Streams on AWS", docs_url=None, redoc_url=None)
    endpoints = StreamEndpoints(settings, store, Wakeups(), telemetry)
    app.state.endpoints = endpoints

    @app.exception_handler(ProtocolError)
    async def _protocol_error(_: Request, exc: ProtocolError) -> Response:
        return responses.protocol_error(exc)

    @app.exception_handler(HTTPException)
    async def _routing_error(_: Request, exc: HTTPException) -> Response:
        # Unknown paths and methods answer in the same shape as every other error.
        return responses.error(
            exc.status_code, responses.error_code(exc.status_code), exc.detail, exc.headers
        )

    @app.exception_handler(StoreUnavailable)
    async def _unavailable(_: Request, exc: StoreUnavailable) -> Response:
        logger.warning("storage unavailable: %s", exc)
        return responses.error(
            503,
            "unavailable",
            "storage is busy; retry shortly",
            {"Retry-After": str(max(settings.retry_after_seconds, exc.retry_after))},
        )

    if settings.listing:

        @app.get(settings.base_path)
        async def listing(request: Request) -> Response:
            return await list_streams(request, store)

    @app.api_route(settings.base_path + "/{path:path}", methods=_METHODS)
    async def stream(request: Request, path: str) -> Response:
        path = parse_stream_path(path)
        method = request.method
        if method == "GET":
            return await endpoints.read(request, path)
        if method == "POST":
            return await endpoints.append(request, path)
        if method == "PUT":
            return await endpoints.create(request, path)
        if method == "HEAD":
            return await endpoints.head(path)
        if method == "DELETE":
            return await endpoints.delete(path)
        return Response(status_code=204, headers={"Allow": ", ".join(_METHODS)})

    @app.get("/healthz")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    exposed_headers = ["ETag", "Location", *responses.PROTOCOL_HEADERS]
    app.add_middleware(
        CORSMiddleware,
        allow_origins=["*"],
        allow_methods=_METHODS,
        allow_headers=[
            "Content-Type",
            "If-None-Match",
            "Authorization",
            *responses.PROTOCOL_HEADERS,
        ],
        expose_headers=exposed_headers,
        max_age=86400,
    )
    # A cached response is served to every later request for its URL, with or without an
    # Origin header, so the CORS headers of an any-origin deployment go on every response.
    app.add_middleware(
        DefaultHeaders,
        extra=[
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Expose-Headers", ", ".join(exposed_headers)),
        ],
    )
    if access_log is not None:
        app.add_middleware(AccessLog, logger=access_log)
    return app
