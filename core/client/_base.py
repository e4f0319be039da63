"""What the sync and async clients share: their settings and what they learn of the stream."""

from __future__ import annotations

import ssl
from functools import cache

import httpx

from ._offset import Offset
from ._retry import RetryPolicy
from ._wire import HeaderSource, StreamInfo, TokenSource, with_token

# Long enough for a long-poll (the server answers within its timeout, 15 s by default).
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)


@cache
def default_tls() -> ssl.SSLContext:
    """The TLS settings of a client made without one of the caller's: httpx's defaults
    (certifi's roots, or `SSL_CERT_FILE`/`SSL_CERT_DIR` as set when first asked), built once per
    process. Loading the roots takes about 20 ms, which every `DurableStream` would otherwise
    pay again (a Spark query makes several in each of its Python workers)."""
    return httpx.create_ssl_context()


class StreamBase:
    """A stream at `url`. `headers` are added to every request; pass a callable returning them
    to refresh credentials. `token` is a bearer token, or a callable returning the current one
    (asked on every request). Safe requests are retried under `retry`; a plain append never is
    once it may have reached the server (see `OutcomeUnknown`). `content_type` is the stream's,
    which appends carry: given here, or learnt from the server. `tail` is the stream's tail as
    this client last saw it (from create, head, append or close)."""

    def __init__(
        self,
        url: str,
        *,
        headers: HeaderSource = None,
        token: TokenSource = None,
        retry: RetryPolicy | None = None,
        content_type: str | None = None,
    ) -> None:
        self.url = url
        self.headers = with_token(headers, token)
        self.retry = retry or RetryPolicy()
        self.content_type = content_type
        self.tail: Offset | None = None

    def _learn(self, info: StreamInfo) -> StreamInfo:
        self.content_type = info.content_type or self.content_type
        self.tail = info.next_offset
        return info

    def _wrote(self, tail: Offset) -> Offset:
        self.tail = tail
        return tail
