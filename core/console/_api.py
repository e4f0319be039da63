"""The console's routes: its page and assets, and the JSON it reads besides the protocol.

Each answer is parse -> admit -> gather -> respond. Stream data and stream changes never go
through here: the page calls the protocol itself, under the same access control as any client.
What is only here is what the protocol does not show: a listing with each stream's metadata
(the listing extension's access), and the operator views, which need the `operate` grant.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, RedirectResponse, Response

from ..auth import (
    LISTING_NEEDS,
    OPERATOR_NEEDS,
    Action,
    BadToken,
    Bearer,
    Decision,
    Grant,
    Need,
    Presented,
    Refused,
    operator_needs,
)
from ..http import responses
from ..http.listing import PAGE_ITEMS
from ..protocol import caching
from ..protocol.errors import ProtocolError, bad_request
from ..protocol.headers import format_expires_at
from ..protocol.paths import parse_path_prefix, parse_stream_path
from ..storage import InvalidCursor
from ..subscriptions.errors import SubscriptionError
from ._assets import (
    ASSET_CACHE,
    PAGE_CACHE,
    SECURITY_HEADERS,
    SHOWN,
    ConsoleAssets,
    page_csp,
)
from ._rates import RateSource
from ._reports import stream_internals, stream_row, subscription_internals
from ._scans import Gathered, ScanCache

logger = logging.getLogger("dsaws")
_CSP_HEADER = "Content-Security-Policy"
Admit = Callable[[Request, tuple[Need, ...], str], Awaitable[Decision]]
# Reads the bearer token a request carries (None: access control is off).
ReadBearer = Callable[[Mapping[str, str]], Presented]

# The store's figures cost a scan of the table and the bucket: answered from memory for this
# long, and scanned again on request only once they are this old.
STATS_MAX_AGE = 60.0
STATS_REFRESH_AFTER = 10.0
FORKS_MAX_AGE = 60.0
# A scan that takes longer is given up (a function has a timeout): `dsaws stats` has none.
SCAN_DEADLINE = 20.0
FORKS_CACHED = 256
SUBSCRIPTIONS_SHOWN = 200
# Every link of every subscription is read for a look: shared by the tabs polling it.
SUBSCRIPTIONS_MAX_AGE = 5.0
_EVERYTHING = Grant(frozenset(Action), "")


try:
    _VERSION = version("durable-streams-aws")
except PackageNotFoundError:  # running from a source tree that was never installed
    _VERSION = "unknown"


class ScanTooLong(Exception):
    pass


class RatesUnavailable(Exception):
    pass


@dataclass
class ConsoleParts:
    settings: Any  # core.config.Settings
    store: Any  # core.storage.DynamoStore
    admit: Admit
    bearer: ReadBearer | None
    rates: RateSource
    subscriptions: Any | None  # core.subscriptions.Subscriptions, when served


def add_console_routes(app: FastAPI, parts: ConsoleParts, assets: ConsoleAssets) -> None:
    console = parts.settings.console_path
    routes = _Routes(parts, assets)
    table: list[tuple[str, Callable[..., Awaitable[Response]]]] = [
        ("", routes.to_page),
        ("/", routes.page),
        ("/assets/{name}", routes.asset),
        ("/api/session", routes.session),
        ("/api/streams", routes.streams),
        ("/api/stream/{path:path}", routes.stream),
        ("/api/forks/{path:path}", routes.forks),
        ("/api/overview", routes.overview),
        ("/api/subscriptions", routes.subscription_list),
    ]
    for suffix, endpoint in table:
        app.add_api_route(console + suffix, _secured(endpoint), methods=["GET"])


def _secured(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    """Every console answer, errors included, with the console's security headers."""

    async def secured(request: Request) -> Response:
        try:
            response = await endpoint(request)
        except ProtocolError as exc:
            response = responses.protocol_error(exc)
        page_policy = response.headers.get(_CSP_HEADER)
        response.headers.update(SECURITY_HEADERS)
        if page_policy is not None:
            response.headers[_CSP_HEADER] = page_policy  # its own nonce
        return response

    secured.__name__ = endpoint.__name__
    return secured


def _json(document: Mapping[str, Any]) -> Response:
    return JSONResponse(document, headers={"Cache-Control": caching.NO_STORE})


class _Routes:
    def __init__(self, parts: ConsoleParts, assets: ConsoleAssets) -> None:
        self.parts = parts
        self.assets = assets
        self.settings = parts.settings
        self.stats = ScanCache(STATS_MAX_AGE)
        self.fork_lists = ScanCache(FORKS_MAX_AGE, capacity=FORKS_CACHED)
        self.rates = ScanCache(parts.rates.cache_seconds)
        self.subscriptions = ScanCache(SUBSCRIPTIONS_MAX_AGE)
        # A scan must end well before the function that runs it is stopped.
        timeout = self.settings.function_timeout
        self.scan_deadline = SCAN_DEADLINE if timeout is None else min(SCAN_DEADLINE, timeout / 2)

    # ------------------------------------------------------------------ the page

    async def to_page(self, request: Request) -> Response:
        return RedirectResponse(self.settings.console_path + "/", status_code=308)

    async def page(self, request: Request) -> Response:
        nonce = secrets.token_urlsafe(18)
        return Response(
            self.assets.page_with(nonce),
            media_type="text/html; charset=utf-8",
            headers={"Cache-Control": PAGE_CACHE, **SHOWN, _CSP_HEADER: page_csp(nonce)},
        )

    async def asset(self, request: Request) -> Response:
        found = self.assets.asset(request.path_params["name"])
        if found is None:
            return responses.error(404, "not_found", "no such console asset")
        headers = {"Cache-Control": ASSET_CACHE, **SHOWN}
        return Response(found.body, media_type=found.media_type, headers=headers)

    # ------------------------------------------------------------------ who is asking

    async def session(self, request: Request) -> Response:
        settings = self.settings
        document: dict[str, Any] = {
            "base_path": settings.base_path,
            "console_path": settings.console_path,
            "listing": settings.listing,
            "subscriptions": settings.subscriptions,
            "auth": settings.auth,
            "public_prefixes": [prefix or "*" for prefix in settings.public_prefixes],
            "actions": [action.value for action in Action],
        }
        if self.parts.bearer is None:
            everything = [_EVERYTHING.render()]
            return _json(
                {**document, "version": _VERSION, "authenticated": False, "grants": everything}
            )
        presented = await run_in_threadpool(self.parts.bearer, request.headers)
        if isinstance(presented, BadToken):
            refusal = Refused(401, "unauthorized", f"token refused: {presented.reason}")
            return responses.refused(refusal)
        if not isinstance(presented, Bearer):  # anonymous: no more than the page needs
            return _json({**document, "authenticated": False, "grants": []})
        grants = [grant.render() for grant in presented.grants]
        return _json({**document, "version": _VERSION, "authenticated": True, "grants": grants})

    async def _admit(self, request: Request, needs: tuple[Need, ...]) -> Refused | None:
        decision = await self.parts.admit(request, needs, needs[0].path)
        return decision if isinstance(decision, Refused) else None

    # ------------------------------------------------------------------ streams

    async def streams(self, request: Request) -> Response:
        if not self.settings.listing:
            return responses.error(
                404,
                "listing_off",
                "listing streams is off on this server: set DS_LISTING=true (a deployment: "
                "the template parameter EnableListing=true); streams can still be opened by path",
            )
        query = request.query_params
        unknown = sorted(set(query) - {"prefix", "cursor"})
        if unknown:
            raise bad_request(f"takes prefix and cursor only, not {', '.join(unknown)}")
        prefix = parse_path_prefix(query.get("prefix", ""))
        cursor = query.get("cursor") or None
        refused = await self._admit(request, LISTING_NEEDS)
        if refused is not None:
            return responses.refused(refused)
        try:
            page = await run_in_threadpool(
                self.parts.store.list_streams, prefix, cursor, PAGE_ITEMS
            )
        except InvalidCursor:
            raise bad_request("cursor is not one this server gave out") from None
        return _json({"streams": [stream_row(info) for info in page.infos], "next": page.cursor})

    async def stream(self, request: Request) -> Response:
        path = parse_stream_path(request.path_params["path"])
        refused = await self._admit(request, operator_needs(path))
        if refused is not None:
            return responses.refused(refused)
        store = self.parts.store

        def gather() -> dict[str, Any] | None:
            info = store.get(path)
            if info is None or info.soft_deleted:
                return None
            return stream_internals(info, store.producers(info), store.clock())

        found = await run_in_threadpool(gather)
        if found is None:
            return responses.error(404, "not_found", "stream not found")
        return _json(found)

    async def forks(self, request: Request) -> Response:
        path = parse_stream_path(request.path_params["path"])
        refused = await self._admit(request, operator_needs(path))
        if refused is not None:
            return responses.refused(refused)
        store = self.parts.store
        info = await run_in_threadpool(store.get, path)
        if info is None or info.soft_deleted:
            return responses.error(404, "not_found", "stream not found")
        if info.ref_count == 0:  # nothing reads it: no scan to make
            return _json({"forks": [], "hidden": 0, **_age(Gathered([], time.time()))})
        try:
            gathered = await self.fork_lists.get(
                path, lambda: store.forks_of(path, self._deadline_check())
            )
        except ScanTooLong:
            return self._too_long("the forks of this stream")
        visible = await self._readable(request, gathered.value)
        hidden = len(gathered.value) - len(visible)
        return _json({"forks": visible, "hidden": hidden, **_age(gathered)})

    async def _readable(self, request: Request, paths: list[str]) -> list[str]:
        """The paths the request's credential may read or operate on: a fork may lie outside
        the prefixes its source's operator may see."""
        if self.parts.bearer is None:
            return paths
        presented = await run_in_threadpool(self.parts.bearer, request.headers)
        grants = presented.grants if isinstance(presented, Bearer) else ()
        public = self.settings.public_prefixes
        return [
            path
            for path in paths
            if Need(Action.READ, path).public_under(public)
            or any(
                grant.allows(Action.READ, path) or grant.allows(Action.OPERATE, path)
                for grant in grants
            )
        ]

    def _deadline_check(self) -> Callable[[int], None]:
        deadline = time.monotonic() + self.scan_deadline

        def check(_: int = 0) -> None:
            if time.monotonic() > deadline:
                raise ScanTooLong()

        return check

    def _too_long(self, what: str) -> Response:
        return responses.unavailable(
            f"{what} take over {self.scan_deadline:g} s to gather here (a scan of the table): "
            "run `dsaws stats` for the store's figures",
            retry_after=60,
        )

    # ------------------------------------------------------------------ operators

    async def overview(self, request: Request) -> Response:
        refresh = request.query_params.get("refresh") in {"1", "true"}
        refused = await self._admit(request, OPERATOR_NEEDS)
        if refused is not None:
            return responses.refused(refused)
        rates = await self._rates()
        fresh_after = STATS_REFRESH_AFTER if refresh else None
        try:
            gathered = await self.stats.get("", self._gather_stats, fresh_after)
        except ScanTooLong:
            return self._too_long("the store's figures")
        age = _age(gathered)
        return _json(
            {
                "rates": rates,
                "stored": gathered.value,
                "stored_as_of": age["as_of"],
                "stored_age_seconds": age["age_seconds"],
            }
        )

    async def _rates(self) -> dict[str, Any]:
        """The rates, or why there are none (CloudWatch may refuse or throttle): the store's
        figures are shown either way."""
        source = self.parts.rates
        try:
            gathered = await self.rates.get("", lambda: source.rates().as_dict())
        except Exception as exc:
            logger.warning("console: the rates could not be read: %s", exc)
            return {"error": f"the rates could not be read: {type(exc).__name__}"}
        return gathered.value

    def _gather_stats(self) -> dict[str, Any]:
        from ..storage import gather_stats  # the scan's module, loaded when first asked

        return gather_stats(self.parts.store, self._deadline_check()).as_dict()

    async def subscription_list(self, request: Request) -> Response:
        service = self.parts.subscriptions
        if service is None:
            return responses.error(404, "subscriptions_off", "subscriptions are off on this server")
        refused = await self._admit(request, OPERATOR_NEEDS)
        if refused is not None:
            return responses.refused(refused)

        def gather() -> dict[str, Any]:
            live = [entry for entry in service.store.all() if not entry.deleted]
            listed = []
            for subscription in live[:SUBSCRIPTIONS_SHOWN]:
                try:
                    current, statuses = service.describe(subscription.id)
                except SubscriptionError:  # removed since the listing
                    continue
                listed.append(subscription_internals(current, statuses))
            return {"subscriptions": listed, "total": len(live)}

        gathered = await self.subscriptions.get("", gather)
        return _json({**gathered.value, **_age(gathered)})


def _age(gathered: Gathered) -> dict[str, Any]:
    return {
        "as_of": format_expires_at(gathered.at),
        "age_seconds": round(max(0.0, time.time() - gathered.at), 1),
    }
