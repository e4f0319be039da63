"""The reserved `__ds` control API: subscriptions, their wakes, and the webhook JWKS.

Each route reads as parse -> execute -> respond: the route parses (`subscription_requests`),
the subscription service decides, and the route maps its outcome onto a status. Errors
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
    AuthorizedWake,
    Creation,
    Delivery,
    LinkStatus,
    Subscription,
    SubscriptionError,
    Subscriptions,
    parse_config,
    parse_subscription_id,
    stream_report,
)
from ..subscriptions.config import parse_json_object, stream_path
from .bodies import read_within
from .responses import bodyless, refused
from .subscription_requests import (
    bearer_token,
    parse_added_streams,
    parse_completion,
    parse_fence,
    parse_worker,
)

logger = logging.getLogger("dsaws")
JWKS_MEDIA_TYPE = "application/jwk-set+json"
Admit = Callable[[Request, tuple[Need, ...]], Awaitable[Decision]]
Work = Callable[[str], Awaitable[Response]]
_CREATION_STATUS = {Creation.CREATED: 201, Creation.CONFIRMED: 200}
_ANY_METHOD = ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"]


class SubscriptionEndpoints:
    """The routes under `{base_path}/__ds/`, registered before the stream routes. `admit` is
    the access check for control requests; wake requests (callbacks, acks, releases) carry
    the wake's own token instead, which only a webhook's receiver or a claim's winner holds.
    `public_root`: the stream root's URL as the request saw it."""

    def __init__(
        self,
        service: Subscriptions,
        public_root: Callable[[Request], str],
        admit: Admit,
        *,
        allow_local_http: bool,
    ) -> None:
        self.service = service
        self.public_root = public_root
        self.admit = admit
        self.allow_local_http = allow_local_http

    def add_routes(self, app: FastAPI, base_path: str) -> None:
        control = f"{base_path}/{RESERVED_SEGMENT}"
        one = f"{control}/subscriptions/{{sid}}"
        routes: list[tuple[str, Callable[[Request], Awaitable[Response]], list[str]]] = [
            (f"{control}/jwks.json", self.signing_keys, ["GET", "HEAD"]),
            (one, self.create, ["PUT"]),
            (one, self.read, ["GET", "HEAD"]),
            (one, self.remove, ["DELETE"]),
            (f"{one}/streams", self.add_streams, ["POST"]),
            (f"{one}/streams/{{path:path}}", self.remove_stream, ["DELETE"]),
            (f"{one}/claim", self.claim, ["POST"]),
            (f"{one}/callback", self.callback, ["POST"]),
            (f"{one}/ack", self.ack, ["POST"]),
            (f"{one}/release", self.release, ["POST"]),
            (f"{control}/{{rest:path}}", self.unknown, _ANY_METHOD),
        ]
        for path, endpoint, methods in routes:
            app.add_api_route(path, endpoint, methods=methods)

    # ---------------------------------------------------------------- control requests

    async def signing_keys(self, request: Request) -> Response:
        from ..subscriptions import jwks

        body = json.dumps(jwks([self.service.keys.signing]))
        headers = {"Cache-Control": "public, max-age=300"}
        return _as_asked(request, Response(body, media_type=JWKS_MEDIA_TYPE, headers=headers))

    async def create(self, request: Request) -> Response:
        async def work(sid: str) -> Response:
            body = await _body(request)
            config = parse_config(body, allow_local_http=self.allow_local_http)
            if config.wake_stream is not None:  # the server will append to it
                access = await self.admit(request, (Need(Action.APPEND, config.wake_stream),))
                if isinstance(access, Refused):
                    return refused(access)
            root = self.public_root(request)
            outcome, created = await run_in_threadpool(self.service.create, sid, config, root)
            _, statuses = await run_in_threadpool(self.service.describe, sid)
            document = await self._described(created, statuses, request)
            return _json(_CREATION_STATUS[outcome], document)

        return await self._answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    async def read(self, request: Request) -> Response:
        async def work(sid: str) -> Response:
            found, statuses = await run_in_threadpool(self.service.describe, sid)
            return _as_asked(request, _json(200, await self._described(found, statuses, request)))

        return await self._answer(request, SUBSCRIPTION_READ_NEEDS, work)

    async def remove(self, request: Request) -> Response:
        async def work(sid: str) -> Response:
            await run_in_threadpool(self.service.remove, sid)
            return _no_content()

        return await self._answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    async def add_streams(self, request: Request) -> Response:
        async def work(sid: str) -> Response:
            paths = parse_added_streams(await _body(request))
            await run_in_threadpool(self.service.add_streams, sid, paths)
            return _no_content()

        return await self._answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    async def remove_stream(self, request: Request) -> Response:
        async def work(sid: str) -> Response:
            path = stream_path(request.path_params["path"])
            await run_in_threadpool(self.service.remove_stream, sid, path)
            return _no_content()

        return await self._answer(request, SUBSCRIPTION_WRITE_NEEDS, work)

    async def claim(self, request: Request) -> Response:
        async def work(sid: str) -> Response:
            worker = parse_worker(await _body(request))
            won = await run_in_threadpool(self.service.claim, sid, worker)
            wake = won.subscription.wake
            assert wake is not None
            body = {
                "wake_id": wake.wake_id,
                "generation": wake.generation,
                "token": won.token,
                "streams": [stream.report() for stream in won.streams],
                "lease_ttl_ms": won.subscription.config.lease_ttl_ms,
            }
            return _json(200, body)

        return await self._answer(request, SUBSCRIPTION_CLAIM_NEEDS, work)

    # ---------------------------------------------------------------- wake requests

    async def callback(self, request: Request) -> Response:
        """A webhook's callback: acks, and the end of its wake (`done`)."""
        return await self._complete(request, Delivery.WEBHOOK)

    async def ack(self, request: Request) -> Response:
        """A pull-wake's ack: acks, and the end of its wake (`done`)."""
        return await self._complete(request, Delivery.PULL_WAKE)

    async def _complete(self, request: Request, delivery: Delivery) -> Response:
        async def work(sid: str) -> Response:
            token = bearer_token(request.headers.get("authorization"))
            body = await _body(request)
            next_wake = await run_in_threadpool(
                complete_wake, self.service, sid, token, body, delivery
            )
            return _json(200, {"ok": True, "next_wake": next_wake})

        return await self._answer(request, None, work)

    async def release(self, request: Request) -> Response:
        async def work(sid: str) -> Response:
            token = bearer_token(request.headers.get("authorization"))
            body = await _body(request)
            await run_in_threadpool(release_wake, self.service, sid, token, body)
            return _no_content()

        return await self._answer(request, None, work)

    async def unknown(self, request: Request) -> Response:
        """Every other request under the reserved segment: never a stream."""
        allowed = _allowed_methods(request.path_params["rest"])
        if allowed:
            refusal = SubscriptionError(405, "METHOD_NOT_ALLOWED", "not a method of this resource")
            return _error(refusal, {"Allow": ", ".join(allowed)})
        return _error(SubscriptionError(404, "NOT_FOUND", "no such control resource"))

    # ---------------------------------------------------------------- shared steps

    async def _answer(
        self, request: Request, needs: tuple[Need, ...] | None, work: Work
    ) -> Response:
        """Admit the request (`needs` None: it carries a wake token instead), then run `work`
        with the subscription id; a refusal answers in the control API's error shape."""
        if needs is not None:
            access = await self.admit(request, needs)
            if isinstance(access, Refused):
                return refused(access)
        try:
            return await work(parse_subscription_id(request.path_params["sid"]))
        except SubscriptionError as error:
            return _error(error)
        except StoreUnavailable as exc:  # WriteContention too: a write that kept losing races
            logger.warning("storage unavailable: %s", exc)
            busy = SubscriptionError(503, "UNAVAILABLE", "storage is busy; retry shortly")
            return _error(busy, {"Retry-After": str(max(1, exc.retry_after))})

    async def _described(
        self, subscription: Subscription, statuses: tuple[LinkStatus, ...], request: Request
    ) -> dict[str, Any]:
        # A webhook URL is often a capability (a secret in its path or query): it is shown only
        # to those who may change the subscription, not to everyone who may read its state.
        may_change = not isinstance(await self.admit(request, SUBSCRIPTION_WRITE_NEEDS), Refused)
        # The key is read here, not at start: a cold start never waits on Secrets Manager.
        kid = self.service.keys.signing.kid
        root = self.public_root(request)
        return describe(subscription, statuses, root, kid, show_url=may_change)


def complete_wake(
    service: Subscriptions,
    sid: str,
    token: str | None,
    body: bytes,
    delivery: Delivery | None = None,
) -> bool:
    """A callback or an ack, from its token and body to the service's answer (`next_wake`)."""
    wake, document = _authorized(service, sid, token, body)
    return service.complete(wake, parse_completion(document), delivery)


def release_wake(service: Subscriptions, sid: str, token: str | None, body: bytes) -> None:
    """A release, from its token and body."""
    wake, _ = _authorized(service, sid, token, body)
    service.release(wake)


def _authorized(
    service: Subscriptions, sid: str, token: str | None, body: bytes
) -> tuple[AuthorizedWake, dict[str, Any]]:
    """The wake a wake request's token lets it act on, and the request's body. The token is
    checked before the rest of the body is judged. Blocking: the keys may be read from
    Secrets Manager on first use."""
    document = parse_json_object(body)
    return service.authorize(sid, token, parse_fence(document)), document


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
