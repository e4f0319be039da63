"""Sending a webhook wake: one signed POST to an address checked at send time."""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit, urlunsplit

import httpx

from ._urls import allowed_addresses
from .service import Sent

# Enough for {"done": true} and then some; the rest of a longer answer is never read.
MAX_ANSWER_BYTES = 64 * 1024


class WebhookSender:
    def __init__(self, *, allow_local_http: bool) -> None:
        self.allow_local_http = allow_local_http
        # No redirects: a receiver must not steer the server to another address. No pooled
        # connections: one made for a name must never carry a request for another name that
        # resolved to the same address.
        self._client = httpx.Client(
            follow_redirects=False,
            trust_env=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

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
        deadline = time.monotonic() + timeout
        try:
            with self._client.stream(
                "POST",
                pinned,
                content=body,
                headers=request_headers,
                timeout=timeout,
                extensions={"sni_hostname": host},
            ) as response:
                answer = _read_within(response, deadline)
        except (httpx.HTTPError, TimeoutError) as exc:
            return Sent(False, detail=f"{type(exc).__name__}: {exc}")
        if not 200 <= response.status_code < 300:
            return Sent(False, detail=f"status {response.status_code}")
        return Sent(True, done=_says_done(answer))


def _read_within(response: httpx.Response, deadline: float) -> bytes:
    """The answer's first MAX_ANSWER_BYTES, read by `deadline`: httpx's timeout bounds each
    read, and a receiver trickling a byte at a time must not hold a delivery for longer."""
    answer = bytearray()
    for chunk in response.iter_bytes():
        answer += chunk
        if len(answer) >= MAX_ANSWER_BYTES:
            break
        if time.monotonic() > deadline:
            raise TimeoutError("the webhook's answer took longer than the delivery timeout")
    return bytes(answer[:MAX_ANSWER_BYTES])


def _says_done(content: bytes) -> bool:
    try:
        document = json.loads(content)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("done") is True
