"""The reserved `__ds` control API: subscriptions, their wakes, and the webhook JWKS.

Each route reads as parse -> execute -> respond; the subscription service decides. Errors
answer in the control API's shape, {"error": {"code": ..., "message": ...}}.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ..auth import (
    SUBSCRIPTION_CLAIM_NEEDS,
    SUBSCRIPTION_READ_NEEDS,
    SUBSCRIPTION_WRITE_NEEDS,
    Decision,
    Refused,
)
from ..auth.decision import Need
from ..auth.grants import Action
from ..protocol import caching
from ..protocol.paths import RESERVED_SEGMENT
from ..storage import StoreUnavailable
from ..subscriptions import (
    Delivery,
    LinkStatus,
    Subscription,
    SubscriptionError,
    Subscriptions,
    parse_config,
    parse_subscription_id,
    stream_report,
)
from ..subscriptions.config import stream_path
from .bodies import read_within
from .responses import bodyless, refused

logger = logging.getLogger("dsaws")
JWKS_MEDIA_TYPE = "application/jwk-set+json"
Admit = Callable[[Request, tuple[Need, ...]], Awaitable[Decision]]
Work = Callable[[str], Awaitable[Response]]


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
    access check for control requests; wake requests (callbacks, acks, releases) carry the
    wake's own token instead, which only a webhook's receiver or a claim's winner holds."""
    control = f"{base_path}/{RESERVED_SEGMENT}"

    async def answer(request: Request, needs: tuple[Need, ...] | None, work: Work) -> Response:
        """Admit the request (`needs` None: it carries a wake token instead), then run `work`
        with the subscription id; a refusal answers in the control API's error shape."""
        if needs is not None:
            access = await admit(request, needs)
            if isinstance(access, Refused):
                return refused(access)
        try:
            return await work(parse_subscription_id(request.path_params["sid"]))
        except SubscriptionError as error:
            return _error(error)
        except StoreUnavailable as exc:
            logger.warning("storage unavailable: %s", exc)
            busy = SubscriptionError(503, "UNAVAILABLE", "storage is busy; retry shortly")
            return _error(busy, {"Retry-After": str(max(1, exc.retry_after))})

    async def described(
        subscription: Subscription, statuses: tuple[LinkStatus, ...], request: Request
    ) -> dict[str, Any]:
        # A webhook URL is often a capability (a secret in its path or query): it is shown only
        # to those who may change the subscription, not to everyone who may read its state.
        may_change = not isinstance(await admit(request, SUBSCRIPTION_WRITE_NEEDS), Refused)
        # The key is read here, not at start: a cold start never waits on Secrets Manager.
        kid = service.keys.signing.kid
        return describe(subscription, statuses, public_root(request), kid, show_url=may_change)

    @app.api_route(f"{control}/jwks.json", methods=["GET", "HEAD"])
    async def signing_keys(request: Request) -> Response:
        from ..subscriptions._signing import jwks

        body = json.dumps(jwks([service.keys.signing]))
        headers = {"Cache-Control": "public, max-age=300"}
        return _as_asked(request, Response(body, media_type=JWKS_MEDIA_TYPE, headers=headers))

    @app.put(f"{control}/subscriptions/{{sid}}")
    async def create(request: Request) -> Response:
        async def work(sid: str) -> Response:
            config = parse_config(await _body(request), allow_local_http=allow_local_http)
            if config.wake_stream is not None:  # the server will append to it
                access = await admit(request, (Need(Action.APPEND, config.wake_stream),))
                if isinstance(access, Refused):
                    return refused(access)
            root = public_root(request)
            status, created = await run_in_threadpool(service.create, sid, config, root)
            _, statuses = await run_in_threadpool(service.describe, sid)
            return _json(status, await described(created, statuses, request))

        return await answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    @app.api_route(f"{control}/subscriptions/{{sid}}", methods=["GET", "HEAD"])
    async def read(request: Request) -> Response:
        async def work(sid: str) -> Response:
            found, statuses = await run_in_threadpool(service.describe, sid)
            return _as_asked(request, _json(200, await described(found, statuses, request)))

        return await answer(request, SUBSCRIPTION_READ_NEEDS, work)

    @app.delete(f"{control}/subscriptions/{{sid}}")
    async def remove(request: Request) -> Response:
        async def work(sid: str) -> Response:
            await run_in_threadpool(service.remove, sid)
            return _no_content()

        return await answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    @app.post(f"{control}/subscriptions/{{sid}}/streams")
    async def add_streams(request: Request) -> Response:
        async def work(sid: str) -> Response:
            await run_in_threadpool(service.add_streams, sid, await _body(request))
            return _no_content()

        return await answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    @app.delete(f"{control}/subscriptions/{{sid}}/streams/{{path:path}}")
    async def remove_stream(request: Request) -> Response:
        async def work(sid: str) -> Response:
            path = stream_path(request.path_params["path"])
            await run_in_threadpool(service.remove_stream, sid, path)
            return _no_content()

        return await answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    @app.post(f"{control}/subscriptions/{{sid}}/claim")
    async def claim(request: Request) -> Response:
        async def work(sid: str) -> Response:
            claimed, token, reports = await run_in_threadpool(
                service.claim, sid, await _body(request)
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

        return await answer(request, SUBSCRIPTION_CLAIM_NEEDS, work)

    def completion(delivery: Delivery) -> Callable[[Request], Awaitable[Response]]:
        """A webhook's callback, or a pull-wake's ack: acks, and the end of a wake (`done`)."""

        async def complete(request: Request) -> Response:
            async def work(sid: str) -> Response:
                authorization = request.headers.get("authorization")
                body = await _body(request)
                next_wake = await run_in_threadpool(
                    service.complete, sid, authorization, body, delivery
                )
                return _json(200, {"ok": True, "next_wake": next_wake})

            return await answer(request, None, work)

        return complete

    callback, ack = completion(Delivery.WEBHOOK), completion(Delivery.PULL_WAKE)
    app.add_api_route(f"{control}/subscriptions/{{sid}}/callback", callback, methods=["POST"])
    app.add_api_route(f"{control}/subscriptions/{{sid}}/ack", ack, methods=["POST"])

    @app.post(f"{control}/subscriptions/{{sid}}/release")
    async def release(request: Request) -> Response:
        async def work(sid: str) -> Response:
            authorization = request.headers.get("authorization")
            body = await _body(request)
            await run_in_threadpool(service.release, sid, authorization, body)
            return _no_content()

        return await answer(request, None, work)

    @app.api_route(
        f"{control}/{{rest:path}}", methods=["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"]
    )
    async def unknown(request: Request) -> Response:
        """Every other request under the reserved segment: never a stream."""
        allowed = _allowed_methods(request.path_params["rest"])
        if allowed:
            refusal = SubscriptionError(405, "METHOD_NOT_ALLOWED", "not a method of this resource")
            return _error(refusal, {"Allow": ", ".join(allowed)})
        return _error(SubscriptionError(404, "NOT_FOUND", "no such control resource"))


# Far above any valid control body (an explicit list is at most 64 KiB a request).
MAX_CONTROL_BODY_BYTES = 256 * 1024


async def _body(request: Request) -> bytes:
    body = await read_within(request, MAX_CONTROL_BODY_BYTES)
    if body is None:
        message = f"the body is larger than {MAX_CONTROL_BODY_BYTES} bytes"
        raise SubscriptionError(413, "PAYLOAD_TOO_LARGE", message)
    return body


_RESOURCES = [
    (re.compile(r"jwks\.json"), ("GET", "HEAD")),
    (re.compile(r"subscriptions/[^/]+"), ("GET", "HEAD", "PUT", "DELETE")),
    (re.compile(r"subscriptions/[^/]+/streams"), ("POST",)),
    (re.compile(r"subscriptions/[^/]+/streams/.+"), ("DELETE",)),
    (re.compile(r"subscriptions/[^/]+/(?:claim|callback|ack|release)"), ("POST",)),
]


def _allowed_methods(rest: str) -> tuple[str, ...]:
    """The methods of the control resource at `rest` (none: there is no such resource)."""
    for pattern, methods in _RESOURCES:
        if pattern.fullmatch(rest):
            return methods
    return ()


def describe(
    subscription: Subscription,
    statuses: tuple[LinkStatus, ...],
    root: str,
    kid: str,
    *,
    show_url: bool = True,
) -> dict[str, Any]:
    """The subscription as PROTOCOL 6.3 shows it; without `show_url`, its webhook's URL is
    null (the reader may not change the subscription)."""
    config = subscription.config
    webhook = None
    if config.webhook_url is not None:
        webhook = {
            "url": config.webhook_url if show_url else None,
            "signing": {
                "alg": "ed25519",
                "kid": kid,
                "jwks_url": f"{root}{RESERVED_SEGMENT}/jwks.json",
            },
        }
    # Every field is present, null where it does not apply (as PROTOCOL 6.3 shows).
    return {
        "id": subscription.id,
        "subscription_id": subscription.id,
        "type": config.delivery.value,
        "pattern": config.pattern,
        "streams": [stream_report(status) for status in statuses],
        "webhook": webhook,
        "wake_stream": config.wake_stream,
        "lease_ttl_ms": config.lease_ttl_ms,
        "created_at": _iso(subscription.created_at),
        "status": subscription.status,
        "description": config.description,
    }


def _iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _json(status: int, document: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(document),
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": caching.NO_STORE, **(headers or {})},
    )


def _as_asked(request: Request, response: Response) -> Response:
    """The GET's answer, or for HEAD its status and headers alone."""
    return bodyless(response) if request.method == "HEAD" else response


def _no_content() -> Response:
    return Response(status_code=204, headers={"Cache-Control": caching.NO_STORE})


def _error(error: SubscriptionError, headers: dict[str, str] | None = None) -> Response:
    return _json(error.status, error.body(), headers)
