"""`dsaws serve` on a loopback address without access control answers this machine's users,
and a browser on this machine must not become a bridge to it for a page of another site:

- **DNS rebinding.** A page at `http://rebind.example:4437`, whose name its owner then points
  at 127.0.0.1, is same-origin with the server as far as the browser knows, so CORS does not
  apply. It cannot choose the `Host` header, which names the site it asked for: only requests
  for a loopback name are answered (or from the local CDN, which names its upstream as `Host`
  and the viewer's own `Host` in `X-Forwarded-Host`, which it sets itself).
- **Cross-site requests.** CORS keeps another site's page from reading answers, not from
  sending what browsers send without asking (a `text/plain` POST, a form, an image). Requests
  a browser marks as coming from a page elsewhere (an `Origin` that is not on this machine and
  not one the operator allowed, or `Sec-Fetch-Site: cross-site` without an `Origin`) are
  refused before any handler runs: nothing is read or written for them.

Pages served from this machine (any loopback origin, any port: the console, a frontend in
development) are let through. Deployments use access control instead (bearer tokens are never
sent by a browser on its own), and do not use this.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from . import responses
from .requests import forwarded_host

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
# The name the local CDN (infra/local_cdn, nginx) gives the server it proxies to.
CDN_UPSTREAM = "origin"
LOCAL_ORIGIN_PATTERN = r"https?://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]{1,5})?"


def host_name(value: str) -> str:
    """The name in a `Host` header: `127.0.0.1:4437` -> `127.0.0.1`, `[::1]:80` -> `::1`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_local_origin(origin: str) -> bool:
    """Whether an `Origin` names a page served from this machine (http or https, any port)."""
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 (a malformed port raises here)
    except ValueError:
        return False
    return (
        parts.scheme in {"http", "https"}
        and parts.hostname in LOOPBACK_NAMES
        and not (parts.path or parts.query or parts.fragment or parts.username)
    )


def refusal(headers: Mapping[str, str], allowed_origins: Collection[str]) -> tuple[int, str] | None:
    """Why a request to a loopback-only server is refused (status, reason), or None. `headers`
    by lowercase name; `allowed_origins`: other sites' origins the operator allowed (`*`:
    any; the `Host` is checked all the same)."""
    host = host_name(headers.get("host", ""))
    if host == CDN_UPSTREAM:
        host = host_name(forwarded_host(headers))
    if host not in LOOPBACK_NAMES:
        return 421, "this server answers requests for its loopback address only"
    origin = headers.get("origin")
    if origin is not None:
        if is_local_origin(origin) or origin in allowed_origins or "*" in allowed_origins:
            return None
        return 403, "a page of another site may not call this server (it has no access control)"
    if headers.get("sec-fetch-site") == "cross-site":
        return 403, "a page of another site may not call this server (it has no access control)"
    return None


class LoopbackOnly:
    """Refuses, before anything else runs, requests `refusal` names a reason for. A CORS
    preflight from another site's page (which changes nothing) is answered with what the server
    allows but without `Access-Control-Allow-Origin`: the browser then sends nothing, and a
    client that checks only what a preflight allows (the conformance suite) finds it."""

    def __init__(
        self,
        app: ASGIApp,
        allowed_origins: Collection[str] = (),
        preflight: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.allowed_origins = frozenset(allowed_origins)
        self.preflight = dict(preflight or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {
                name.decode("latin-1").lower(): value.decode("latin-1")
                for name, value in scope.get("headers", [])
            }
            refused = refusal(headers, self.allowed_origins)
            is_preflight = (
                scope["method"] == "OPTIONS" and "access-control-request-method" in headers
            )
            if refused is not None and refused[0] == 403 and is_preflight:
                answer = Response(
                    status_code=204,
                    headers={**self.preflight, "Vary": "Origin", "Cache-Control": "no-store"},
                )
                await answer(scope, receive, send)
                return
            if refused is not None:
                status, reason = refused
                code = "misdirected" if status == 421 else "cross_site"
                answer = responses.error(status, code, reason)
                if scope["method"] == "HEAD":
                    answer = responses.bodyless(answer)
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)
