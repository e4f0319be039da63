"""The reserved `__ds` control API: subscriptions, their wakes, and the webhook JWKS.

Each route reads as parse -> execute -> respond; the subscription service decides. Errors
answer in the control API's shape, {"error": {"code": ..., "message": ...}}.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ..auth import SUBSCRIPTION_READ_NEEDS, SUBSCRIPTION_WRITE_NEEDS
from ..auth.decision import Need
from ..auth.grants import Action
from ..protocol import caching
from ..protocol.paths import RESERVED_SEGMENT
from ..subscriptions import (
    LinkStatus,
    Subscription,
    SubscriptionError,
    Subscriptions,
    parse_config,
    parse_subscription_id,
    stream_report,
)
from ..subscriptions._signing import jwks
from ..subscriptions.config import stream_path

JWKS_MEDIA_TYPE = "application/jwk-set+json"
Admit = Callable[[Request, tuple[Need, ...]], Awaitable[Response | None]]


def add_subscription_routes(
    app: FastAPI,
    base_path: str,
    service: Subscriptions,
    public_root: Callable[[Request], str],
    admit: Admit,
    *,
    allow_local_http: bool,
) -> None:
    """Routes under `{base_path}/__ds/`, registered before the stream routes. `admit` is the
    access check for control requests (None: let in); wake requests carry their own token."""
    control = f"{base_path}/{RESERVED_SEGMENT}"

    def described(
        subscription: Subscription, statuses: tuple[LinkStatus, ...], request: Request
    ) -> dict[str, Any]:
        # The key is read here, not at start: a cold start never waits on Secrets Manager.
        return describe(subscription, statuses, public_root(request), service.keys.signing.kid)

    @app.get(f"{control}/jwks.json")
    async def signing_keys() -> Response:
        body = json.dumps(jwks([service.keys.signing]))
        headers = {"Cache-Control": "public, max-age=300"}
        return Response(body, media_type=JWKS_MEDIA_TYPE, headers=headers)

    @app.api_route(f"{control}/subscriptions/{{sid}}", methods=["PUT", "GET", "DELETE"])
    async def subscription(request: Request) -> Response:
        reading = request.method == "GET"
        needs = SUBSCRIPTION_READ_NEEDS if reading else SUBSCRIPTION_WRITE_NEEDS
        refused = await admit(request, needs)
        if refused is not None:
            return refused
        try:
            sid = parse_subscription_id(request.path_params["sid"])
            if request.method == "PUT":
                config = parse_config(await request.body(), allow_local_http=allow_local_http)
                if config.wake_stream is not None:  # the server will append to it
                    refused = await admit(request, (Need(Action.APPEND, config.wake_stream),))
                    if refused is not None:
                        return refused
                status, created = await run_in_threadpool(
                    service.create, sid, config, public_root(request)
                )
                _, statuses = await run_in_threadpool(service.describe, sid)
                return _json(
                    status,
                    describe(created, statuses, public_root(request), service.keys.signing.kid),
                )
            if request.method == "GET":
                found, statuses = await run_in_threadpool(service.describe, sid)
                return _json(
                    200, describe(found, statuses, public_root(request), service.keys.signing.kid)
                )
            await run_in_threadpool(service.remove, sid)
            return Response(status_code=204, headers={"Cache-Control": caching.NO_STORE})
        except SubscriptionError as error:
            return _error(error)

    @app.post(f"{control}/subscriptions/{{sid}}/streams")
    async def add_streams(request: Request) -> Response:
        refused = await admit(request, SUBSCRIPTION_WRITE_NEEDS)
        if refused is not None:
            return refused
        try:
            sid = parse_subscription_id(request.path_params["sid"])
            await run_in_threadpool(service.add_streams, sid, await request.body())
            return Response(status_code=204, headers={"Cache-Control": caching.NO_STORE})
        except SubscriptionError as error:
            return _error(error)

    @app.delete(f"{control}/subscriptions/{{sid}}/streams/{{path:path}}")
    async def remove_stream(request: Request) -> Response:
        refused = await admit(request, SUBSCRIPTION_WRITE_NEEDS)
        if refused is not None:
            return refused
        try:
            sid = parse_subscription_id(request.path_params["sid"])
            path = stream_path(request.path_params["path"])
            await run_in_threadpool(service.remove_stream, sid, path)
            return Response(status_code=204, headers={"Cache-Control": caching.NO_STORE})
        except SubscriptionError as error:
            return _error(error)

    @app.post(f"{control}/subscriptions/{{sid}}/claim")
    async def claim(request: Request) -> Response:
        refused = await admit(request, SUBSCRIPTION_READ_NEEDS)
        if refused is not None:
            return refused
        try:
            sid = parse_subscription_id(request.path_params["sid"])
            claimed, token, reports = await run_in_threadpool(
                service.claim, sid, await request.body()
            )
            wake = claimed.wake
            assert wake is not None
            body = {
                "wake_id": wake.wake_id,
                "generation": wake.generation,
                "token": token,
                "streams": list(reports),
                "lease_ttl_ms": claimed.config.lease_ttl_ms,
            }
            return _json(200, body)
        except SubscriptionError as error:
            return _error(error)

    async def complete(request: Request) -> Response:
        try:
            sid = parse_subscription_id(request.path_params["sid"])
            next_wake = await run_in_threadpool(
                service.complete, sid, request.headers.get("authorization"), await request.body()
            )
            return _json(200, {"ok": True, "next_wake": next_wake})
        except SubscriptionError as error:
            return _error(error)

    app.add_api_route(f"{control}/subscriptions/{{sid}}/callback", complete, methods=["POST"])
    app.add_api_route(f"{control}/subscriptions/{{sid}}/ack", complete, methods=["POST"])

    @app.post(f"{control}/subscriptions/{{sid}}/release")
    async def release(request: Request) -> Response:
        try:
            sid = parse_subscription_id(request.path_params["sid"])
            await run_in_threadpool(
                service.release, sid, request.headers.get("authorization"), await request.body()
            )
            return Response(status_code=204, headers={"Cache-Control": caching.NO_STORE})
        except SubscriptionError as error:
            return _error(error)

    @app.api_route(f"{control}/{{rest:path}}", methods=["GET", "HEAD", "PUT", "POST", "DELETE"])
    async def unknown(request: Request) -> Response:
        return _error(SubscriptionError(404, "NOT_FOUND", "no such control resource"))


def describe(
    subscription: Subscription, statuses: tuple[LinkStatus, ...], root: str, kid: str
) -> dict[str, Any]:
    config = subscription.config
    document: dict[str, Any] = {
        "id": subscription.id,
        "subscription_id": subscription.id,
        "type": config.delivery.value,
        "streams": [stream_report(status) for status in statuses],
        "lease_ttl_ms": config.lease_ttl_ms,
        "created_at": _iso(subscription.created_at),
        "status": subscription.status,
    }
    if config.pattern is not None:
        document["pattern"] = config.pattern
    if config.webhook_url is not None:
        document["webhook"] = {
            "url": config.webhook_url,
            "signing": {
                "alg": "ed25519",
                "kid": kid,
                "jwks_url": f"{root}{RESERVED_SEGMENT}/jwks.json",
            },
        }
    if config.wake_stream is not None:
        document["wake_stream"] = config.wake_stream
    if config.description is not None:
        document["description"] = config.description
    return document


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _json(status: int, document: dict[str, Any]) -> Response:
    return Response(
        json.dumps(document),
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": caching.NO_STORE},
    )


def _error(error: SubscriptionError) -> Response:
    return _json(error.status, error.body())
