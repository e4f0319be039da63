"""Sending a webhook wake: one signed POST, re-checked against SSRF at send time."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx

from ._urls import resolve_allowed
from .service import Sent


class WebhookSender:
    def __init__(self, *, allow_local_http: bool) -> None:
        self.allow_local_http = allow_local_http
        # No redirects: a receiver must not steer the server to another address.
        self._client = httpx.Client(follow_redirects=False, trust_env=False)

    def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> Sent:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        # The URL was checked when the subscription was made; its name may resolve elsewhere
        # now (DNS rebinding), so its addresses are checked again before every POST.
        if not resolve_allowed(parts.hostname or "", port, allow_local_http=self.allow_local_http):
            return Sent(False, detail="the webhook host resolves to a refused address")
        try:
            response = self._client.post(url, content=body, headers=headers, timeout=timeout)
        except httpx.HTTPError as exc:
            return Sent(False, detail=f"{type(exc).__name__}: {exc}")
        if not 200 <= response.status_code < 300:
            return Sent(False, detail=f"status {response.status_code}")
        return Sent(True, done=_says_done(response.content))


def _says_done(content: bytes) -> bool:
    try:
        document = json.loads(content)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("done") is True
