"""Sending a webhook wake: one signed POST to an address checked at send time, over within
its timeout whatever the receiver does."""

from __future__ import annotations

import asyncio
import json
import ssl
from urllib.parse import urlsplit, urlunsplit

import httpx

from ._urls import allowed_addresses
from .ports import Sent

# Enough for {"done": true} and then some; the rest of a longer answer is never read.
MAX_ANSWER_BYTES = 64 * 1024


class WebhookSender:
    def __init__(self, *, allow_local_http: bool) -> None:
        self.allow_local_http = allow_local_http
        # Loading the CA bundle takes some 50 ms: once, not per delivery.
        self._tls = httpx.create_ssl_context()

    def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> Sent:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        # The URL was checked when the subscription was made, but its name may resolve
        # elsewhere now (DNS rebinding). The name is resolved and checked here, and the POST
        # goes to the checked address: the name is kept for the Host header and for TLS (SNI
        # and certificate verification), so nothing resolves it a second time.
        addresses = allowed_addresses(host, port, allow_local_http=self.allow_local_http)
        if addresses is None:
            return Sent(False, detail="the webhook host resolves to a refused address")
        address = addresses[0]
        literal = f"[{address}]" if ":" in address else address
        pinned = urlunsplit(parts._replace(netloc=f"{literal}:{port}"))
        request_headers = {**headers, "Host": parts.netloc.rpartition("@")[2]}
        # Each delivery runs on a worker thread of its own: an event loop of its own gives it
        # a deadline for the whole exchange (httpx's timeouts bound each read, and a receiver
        # trickling its headers or body a byte at a time would outlast any of them).
        try:
            status, answer = asyncio.run(
                _post(pinned, body, request_headers, host, timeout, self._tls), debug=False
            )
        except (httpx.HTTPError, TimeoutError) as exc:
            detail = str(exc) or "no answer within the delivery timeout"
            return Sent(False, detail=f"{type(exc).__name__}: {detail}")
        if not 200 <= status < 300:
            return Sent(False, detail=f"status {status}")
        return Sent(True, done=_says_done(answer))


async def _post(
    url: str, body: bytes, headers: dict[str, str], host: str, timeout: float, tls: ssl.SSLContext
) -> tuple[int, bytes]:
    # No redirects: a receiver must not steer the server to another address. A client per
    # delivery: a connection made for one name never carries a request for another.
    async with (
        asyncio.timeout(timeout),
        httpx.AsyncClient(follow_redirects=False, trust_env=False, verify=tls) as client,
        client.stream(
            "POST",
            url,
            content=body,
            headers=headers,
            timeout=timeout,
            extensions={"sni_hostname": host},
        ) as response,
    ):
        answer = bytearray()
        async for chunk in response.aiter_bytes():
            answer += chunk
            if len(answer) >= MAX_ANSWER_BYTES:
                break
        return response.status_code, bytes(answer[:MAX_ANSWER_BYTES])


def _says_done(content: bytes) -> bool:
    try:
        document = json.loads(content)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("done") is True
