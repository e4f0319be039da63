"""The FastAPI application: routes map HTTP onto the store through the protocol helpers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from .auth import (
    LISTING_NEEDS,
    OPEN,
    Decision,
    KeysUnavailable,
    Need,
    OriginLock,
    Refused,
    needs_for,
)
from .auth.origin import origin_secret_source
from .cdn.policy import KEY_QUERY_PARAMETERS
from .config import Settings
from .http import responses
from .http.listing import list_streams
from .http.middleware import AccessLog, DefaultHeaders
from .http.streams import StreamEndpoints
from .http.wakeups import Wakeups
from .protocol.errors import ProtocolError
from .protocol.paths import parse_stream_path
from .protocol.query import check_parameter_names
from .storage import StoreUnavailable, StreamStore
from .telemetry import Telemetry

if TYPE_CHECKING:
    from .auth.guard import Guard

logger = logging.getLogger("dsaws")
_METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS"]


def create_app(
    settings: Settings,
    store: StreamStore,
    telemetry: Telemetry | None = None,
    access_log: logging.Logger | None = None,
    *,
    store_in_process: bool = False,
) -> FastAPI:
    """`store_in_process`: the store answers in this process without waiting on a network
    (the embedded emulator): most of its calls are then made on the event loop itself."""
    app = FastAPI(title="Durable Streams on AWS", docs_url=None, redoc_url=None)
    endpoints = StreamEndpoints(settings, store, Wakeups(), telemetry, store_in_process)
    app.state.endpoints = endpoints
    guard = _guard(settings)
    if settings.subscriptions:
        _add_subscriptions(app, settings, store, endpoints, lambda r, n: admit(r, n, ""))

    async def admit(request: Request, needs: tuple[Need, ...], path: str) -> Decision:
        """Access control, before anything else touches the store. Every cache-key parameter
        must be spelled literally, whatever the method: a CDN keys on the names as sent."""
        check_parameter_names(request.scope.get("query_string", b""), KEY_QUERY_PARAMETERS)
        if guard is None:
            return OPEN
        items = request.query_params.multi_items()
        return await run_in_threadpool(guard.check, needs, request.headers, items, path)

    @app.exception_handler(ProtocolError)
    async def _protocol_error(_: Request, exc: ProtocolError) -> Response:
        return responses.protocol_error(exc)

    @app.exception_handler(HTTPException)
    async def _routing_error(_: Request, exc: HTTPException) -> Response:
        # Unknown paths and methods answer in the same shape as every other error.
        return responses.error(
            exc.status_code, responses.error_code(exc.status_code), exc.detail, exc.headers
        )

    @app.exception_handler(ClientDisconnect)
    async def _client_left(request: Request, _: ClientDisconnect) -> Response:
        # Normal on the internet (a tab closed, a timeout): one line, not a traceback.
        logger.info(
            "%s %s: the client left before its body arrived", request.method, request.url.path
        )
        return responses.client_gone()

    @app.exception_handler(StoreUnavailable)
    async def _unavailable(_: Request, exc: StoreUnavailable) -> Response:
        logger.warning("storage unavailable: %s", exc)
        retry_after = max(settings.retry_after_seconds, exc.retry_after)
        return responses.unavailable("storage is busy; retry shortly", retry_after)

    @app.exception_handler(KeysUnavailable)
    async def _keys_unavailable(_: Request, exc: KeysUnavailable) -> Response:
        logger.warning("access control keys unavailable: %s", exc)
        message = "credentials cannot be checked right now; retry shortly"
        return responses.unavailable(message, settings.retry_after_seconds)

    if settings.listing:

        @app.get(settings.base_path)
        async def listing(request: Request) -> Response:
            access = await admit(request, LISTING_NEEDS, "")
            if isinstance(access, Refused):
                return responses.refused(access)
            return await list_streams(request, store)

    # The path is read from the request rather than declared as a parameter: FastAPI would
    # build a validation model for it (and import pydantic.v1 to do so) for a plain string.
    @app.api_route(settings.base_path + "/{path:path}", methods=_METHODS)
    async def stream(request: Request) -> Response:
        path = parse_stream_path(request.path_params["path"])
        method = request.method
        source = endpoints.fork_source(request) if method == "PUT" else None
        access = await admit(request, needs_for(method, path, source), path)
        if isinstance(access, Refused):
            refusal = responses.refused(access)
            return responses.bodyless(refusal) if method == "HEAD" else refusal
        if method == "GET":
            return await endpoints.read(request, path, access)
        if method == "POST":
            return await endpoints.append(request, path)
        if method == "PUT":
            return await endpoints.create(request, path)
        if method == "HEAD":
            return await endpoints.head(path)
        if method == "DELETE":
            return await endpoints.delete(path)
        return Response(status_code=204, headers={"Allow": ", ".join(_METHODS)})

    @app.get("/healthz", response_model=None)  # no model to validate a constant against
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    if settings.origin_lock != "off":
        secrets = origin_secret_source(
            settings.origin_secret, settings.origin_secret_id, settings.auth_keys_max_age
        )
        secrets.current()  # at start: a secret that cannot be read fails the start
        app.add_middleware(OriginLock, lock=settings.origin_lock, secrets=secrets)
        app.state.origin_secrets = secrets  # for a warm-up request that must get through
    exposed_headers = ["ETag", "Location", "WWW-Authenticate", *responses.PROTOCOL_HEADERS]
    any_origin = settings.cors_origin_list == ("*",)
    # Bearer tokens travel in a header, not in cookies: browsers never need credentials mode,
    # so credentials are never allowed, and never reflected to whatever origin asks.
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(settings.cors_origin_list),
        allow_credentials=False,
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
    # Origin header, so the CORS headers of an any-origin deployment go on every response a
    # cache may keep. A list of origins is answered per request, and the CDN keys on the
    # Origin header. A response nobody may store goes only to the request that asked, and
    # CORSMiddleware gives that one the headers if it came with an Origin.
    cors_defaults = [
        ("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Expose-Headers", ", ".join(exposed_headers)),
    ]
    app.add_middleware(DefaultHeaders, cacheable_extra=cors_defaults if any_origin else [])
    if access_log is not None:
        app.add_middleware(AccessLog, logger=access_log)
    return app


def _add_subscriptions(
    app: FastAPI,
    settings: Settings,
    store: StreamStore,
    endpoints: StreamEndpoints,
    admit: Any,
) -> None:
    """The `__ds` control API (its access needs: `core.auth.decision`), and the append
    path's notices to it."""
    from .http.subscriptions import SubscriptionEndpoints
    from .subscriptions.wiring import ConfiguredSubscriptions

    service = ConfiguredSubscriptions(settings, store)  # type: ignore[arg-type]
    app.state.subscriptions = service
    app.router.on_shutdown.append(service.stop)  # the in-process timer thread, if any
    endpoints.on_change = service

    def public_root(request: Request) -> str:
        return endpoints.stream_url(request, "")

    routes = SubscriptionEndpoints(
        service, public_root, admit, allow_local_http=settings.webhook_localhost_allowed
    )
    routes.add_routes(app, settings.base_path)


def _guard(settings: Settings) -> Guard | None:
    """The access checks, when the deployment asks for them (PyJWT is loaded only then)."""
    if not settings.auth:
        return None
    from .auth.guard import Guard

    return Guard(settings)
