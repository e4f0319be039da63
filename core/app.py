"""The FastAPI application, assembled from tables: the error handlers, the route groups (in
the order they are matched) and the middleware (outermost first), each configured by the
settings. A new route group or middleware is a row here; the routes' work is in `core.http`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

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
    Refused,
    needs_for,
)
from .auth.origin import origin_secret_source
from .cdn.policy import KEY_QUERY_PARAMETERS
from .config import Settings
from .http import responses
from .http.listing import list_streams
from .http.local_only import LOCAL_ORIGIN_PATTERN, LoopbackOnly
from .http.middleware import AccessLog, DefaultHeaders, ErrorBoundary, RequestId
from .http.origin_lock import OriginLock
from .http.request_metrics import RequestMetrics
from .http.streams import StreamEndpoints
from .http.wakeups import Wakeups
from .protocol.errors import ProtocolError
from .protocol.headers import PROTOCOL_HEADERS
from .protocol.paths import parse_stream_path
from .protocol.query import check_parameter_names
from .storage import StoreUnavailable, StreamStore
from .telemetry import Telemetry

if TYPE_CHECKING:
    from .auth.guard import Guard

logger = logging.getLogger("dsaws")
_METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS"]
# What a browser may read of a cross-origin response, besides the simple headers.
_EXPOSED_HEADERS = ("ETag", "Location", "WWW-Authenticate", "X-Request-Id", *PROTOCOL_HEADERS)
_ALLOWED_HEADERS = ("Content-Type", "If-None-Match", "Authorization", *PROTOCOL_HEADERS)


class Admit(Protocol):
    async def __call__(self, request: Request, needs: tuple[Need, ...], path: str) -> Decision: ...


@dataclass(frozen=True)
class _Parts:
    """What the route groups are built from."""

    settings: Settings
    store: StreamStore
    endpoints: StreamEndpoints
    admit: Admit
    guard: Guard | None
    rates: Any  # the console's rate source (core.console.RateSource), when it is served


@dataclass(frozen=True)
class _RouteGroup:
    """Routes registered together, when the deployment turns them on."""

    enabled: Callable[[Settings], bool]
    add: Callable[[FastAPI, _Parts], None]


@dataclass(frozen=True)
class _Middleware:
    """A middleware and its options, when the deployment asks for it (None: not used)."""

    cls: type
    options: Callable[[Settings, FastAPI], dict[str, Any] | None]


def create_app(
    settings: Settings,
    store: StreamStore,
    telemetry: Telemetry | None = None,
    access_log: logging.Logger | None = None,
    *,
    store_in_process: bool = False,
) -> FastAPI:
    """The app: the error handlers, the route groups and the middleware of the tables below,
    each as the settings configure it.

    `store_in_process`: the store answers in this process without waiting on a network
    (the embedded emulator): most of its calls are then made on the event loop itself."""
    app = FastAPI(title="Durable Streams on AWS", docs_url=None, redoc_url=None)
    stream_telemetry, rates = telemetry, None
    if settings.console:
        stream_telemetry, rates = _console_rates(settings, telemetry)
    endpoints = StreamEndpoints(
        settings.stream_settings, store, Wakeups(), stream_telemetry, store_in_process
    )
    app.state.endpoints = endpoints
    guard = _guard(settings)
    parts = _Parts(settings, store, endpoints, _admission(guard), guard, rates)
    for error_type, handler in _error_handlers(settings.retry_after_seconds).items():
        app.add_exception_handler(error_type, handler)
    for group in _ROUTE_GROUPS:
        if group.enabled(settings):
            group.add(app, parts)
    # Starlette wraps the app in each middleware added, so the last one added runs first.
    for middleware in reversed(_MIDDLEWARE):
        options = middleware.options(settings, app)
        if options is not None:
            app.add_middleware(middleware.cls, **options)
    # Outermost, so that they see every answer with the headers the middleware above added.
    if telemetry is not None:
        app.add_middleware(RequestMetrics, telemetry=telemetry, base_path=settings.base_path)
    if access_log is not None:
        app.add_middleware(AccessLog, logger=access_log)
    return app


def _admission(guard: Guard | None) -> Admit:
    async def admit(request: Request, needs: tuple[Need, ...], path: str) -> Decision:
        """Access control, before anything else touches the store. Every cache-key parameter
        must be spelled literally, whatever the method: a CDN keys on the names as sent."""
        check_parameter_names(request.scope.get("query_string", b""), KEY_QUERY_PARAMETERS)
        if guard is None:
            return OPEN
        items = request.query_params.multi_items()
        return await run_in_threadpool(guard.check, needs, request.headers, items, path)

    return admit


# ---------------------------------------------------------------------------- errors


def _error_handlers(retry_after_seconds: int) -> dict[type[Exception], Any]:
    """How each exception a route may raise is answered, in the shape of every other error."""

    async def protocol_error(_: Request, exc: ProtocolError) -> Response:
        return responses.protocol_error(exc)

    async def routing_error(_: Request, exc: HTTPException) -> Response:
        # Unknown paths and methods answer in the same shape as every other error.
        return responses.error(
            exc.status_code, responses.error_code(exc.status_code), exc.detail, exc.headers
        )

    async def client_left(request: Request, _: ClientDisconnect) -> Response:
        # Normal on the internet (a tab closed, a timeout): one line, not a traceback.
        logger.info(
            "%s %s: the client left before its body arrived", request.method, request.url.path
        )
        return responses.client_gone()

    async def store_unavailable(_: Request, exc: StoreUnavailable) -> Response:
        logger.warning("storage unavailable: %s", exc)
        retry_after = max(retry_after_seconds, exc.retry_after)
        return responses.unavailable("storage is busy; retry shortly", retry_after)

    async def keys_unavailable(_: Request, exc: KeysUnavailable) -> Response:
        logger.warning("access control keys unavailable: %s", exc)
        message = "credentials cannot be checked right now; retry shortly"
        return responses.unavailable(message, retry_after_seconds)

    return {
        ProtocolError: protocol_error,
        HTTPException: routing_error,
        ClientDisconnect: client_left,
        StoreUnavailable: store_unavailable,
        KeysUnavailable: keys_unavailable,
    }


# ---------------------------------------------------------------------------- routes


def _add_listing(app: FastAPI, parts: _Parts) -> None:
    @app.get(parts.settings.base_path)
    async def listing(request: Request) -> Response:
        access = await parts.admit(request, LISTING_NEEDS, "")
        if isinstance(access, Refused):
            return responses.refused(access)
        return await list_streams(request, parts.store)


def _add_streams(app: FastAPI, parts: _Parts) -> None:
    endpoints = parts.endpoints

    # The path is read from the request rather than declared as a parameter: FastAPI would
    # build a validation model for it (and import pydantic.v1 to do so) for a plain string.
    @app.api_route(parts.settings.base_path + "/{path:path}", methods=_METHODS)
    async def stream(request: Request) -> Response:
        path = parse_stream_path(request.path_params["path"])
        method = request.method
        source = endpoints.fork_source(request) if method == "PUT" else None
        access = await parts.admit(request, needs_for(method, path, source), path)
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


def _add_health(app: FastAPI, _: _Parts) -> None:
    @app.get("/healthz", response_model=None)  # no model to validate a constant against
    async def health() -> dict[str, str]:
        return {"status": "ok"}


def _add_subscription_group(app: FastAPI, parts: _Parts) -> None:
    def admit(request: Request, needs: tuple[Need, ...]) -> Awaitable[Decision]:
        return parts.admit(request, needs, "")

    _add_subscriptions(app, parts.settings, parts.store, parts.endpoints, admit)


def _console_rates(settings: Settings, telemetry: Telemetry | None) -> tuple[Telemetry, Any]:
    """The console overview's rates: counted here as the stream endpoints report them, or,
    on a deployment, read back from CloudWatch (every instance's)."""
    from .console import CloudWatchRates, recording

    recorder, recorded = recording(telemetry)
    if settings.console_metrics_namespace is None:
        return recorded, recorder
    import boto3

    cloudwatch = boto3.client("cloudwatch", region_name=settings.region)
    return recorded, CloudWatchRates(cloudwatch, settings.console_metrics_namespace)


def _add_console(app: FastAPI, parts: _Parts) -> None:
    from .console import add_console

    guard = parts.guard
    add_console(
        app,
        parts.settings,
        parts.store,
        parts.admit,
        guard.bearer if guard is not None else None,
        parts.rates,
        getattr(app.state, "subscriptions", None),
    )


def _always(_: Settings) -> bool:
    return True


# In the order they are matched: the `__ds` control API before the stream routes it sits
# under.
_ROUTE_GROUPS = (
    _RouteGroup(lambda settings: settings.subscriptions, _add_subscription_group),
    _RouteGroup(lambda settings: settings.listing, _add_listing),
    _RouteGroup(lambda settings: settings.console, _add_console),
    _RouteGroup(_always, _add_streams),
    _RouteGroup(_always, _add_health),
)


# ---------------------------------------------------------------------------- middleware


def _origin_lock(settings: Settings, app: FastAPI) -> dict[str, Any] | None:
    lock = settings.origin_lock_settings
    if lock.lock == "off":
        return None
    secrets = origin_secret_source(lock.inline_secrets, lock.secret_id, lock.max_age)
    secrets.current()  # at start: a secret that cannot be read fails the start
    app.state.origin_secrets = secrets  # for a warm-up request that must get through
    return {"lock": lock.lock, "secrets": secrets}


def _cors(settings: Settings, _: FastAPI) -> dict[str, Any]:
    # Bearer tokens travel in a header, not in cookies: browsers never need credentials mode,
    # so credentials are never allowed, and never reflected to whatever origin asks.
    return {
        "allow_origins": list(settings.cors.origins),
        # A loopback-only server also answers pages served from this machine, on any port.
        "allow_origin_regex": LOCAL_ORIGIN_PATTERN if settings.loopback_only else None,
        "allow_credentials": False,
        "allow_methods": _METHODS,
        "allow_headers": list(_ALLOWED_HEADERS),
        "expose_headers": list(_EXPOSED_HEADERS),
        "max_age": 86400,
    }


def _default_headers(settings: Settings, _: FastAPI) -> dict[str, Any]:
    # A cached response is served to every later request for its URL, with or without an
    # Origin header, so the CORS headers of an any-origin deployment go on every response a
    # cache may keep. A list of origins is answered per request, and the CDN keys on the
    # Origin header. A response nobody may store goes only to the request that asked, and
    # CORSMiddleware gives that one the headers if it came with an Origin.
    cors_defaults = [
        ("Access-Control-Allow-Origin", "*"),
        ("Access-Control-Expose-Headers", ", ".join(_EXPOSED_HEADERS)),
    ]
    return {"cacheable_extra": cors_defaults if settings.cors.any_origin else []}


def _no_options(_settings: Settings, _app: FastAPI) -> dict[str, Any]:
    return {}


def _loopback_only(settings: Settings, _: FastAPI) -> dict[str, Any] | None:
    if not settings.loopback_only:
        return None
    preflight = {
        "Access-Control-Allow-Methods": ", ".join(_METHODS),
        "Access-Control-Allow-Headers": ", ".join(_ALLOWED_HEADERS),
        "Access-Control-Max-Age": "86400",
    }
    return {"allowed_origins": settings.cors.origins, "preflight": preflight}


# Outermost first: a request passes through them in this order (after the access log).
_MIDDLEWARE = (
    _Middleware(RequestId, _no_options),
    _Middleware(DefaultHeaders, _default_headers),
    _Middleware(ErrorBoundary, _no_options),
    _Middleware(LoopbackOnly, _loopback_only),
    _Middleware(CORSMiddleware, _cors),
    _Middleware(OriginLock, _origin_lock),
)


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

    service = ConfiguredSubscriptions(
        settings.subscription_settings,
        store,  # type: ignore[arg-type]
        endpoints.telemetry,
    )
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

    return Guard(settings.auth_settings)
