"""The pipeline's HTTP transport: httpx's client API over urllib3's connections, for bulk reads.

A bounded read's response is megabytes (`DS_MAX_BOUNDED_READ_BYTES`). httpx's own transport
takes it in 64 KiB pieces, each passed through h11's buffers and joined at the end: 7 to 16 ms
of a Spark worker's CPU for a 5 MB response on a 2-core machine. urllib3 reads a body of known
length into one buffer, in about 2 ms. Everything above the transport stays httpx's, and the
client's: requests, redirects (none are followed), status handling, and the errors the
client's retries tell apart (`httpx.ConnectError` only where nothing was delivered). Where the
environment names a proxy, httpx's own transport is kept (`bulk_transport`): its proxy
support is what a deployment behind one relies on.
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.exceptions import HTTPError as Urllib3Error

# The most bytes of a body of unknown length handed on at a time; what has arrived is handed
# on at once (a live read's events must reach the reader as they come).
_STREAM_PIECE = 1024 * 1024
# Connections kept per server: planning asks up to 16 streams' states at once
# (`_partitions.STATE_LOOKUPS`), and httpx's own pool keeps 20.
_CONNECTIONS_PER_HOST = 20


def bulk_transport() -> httpx.BaseTransport | None:
    """The transport for the pipeline's client: urllib3's, unless the environment names a
    proxy (then None: httpx's own, which goes through it)."""
    proxies = urllib.request.getproxies()
    if any(proxies.get(scheme) for scheme in ("http", "https", "all")):
        return None
    return Urllib3Transport()


class Urllib3Transport(httpx.BaseTransport):
    def __init__(self, connections_per_host: int = _CONNECTIONS_PER_HOST) -> None:
        # httpx's TLS defaults (certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR), so that
        # what a deployment's certificate must be signed by does not change with the transport.
        self._pool = urllib3.PoolManager(
            maxsize=connections_per_host, ssl_context=httpx.create_ssl_context()
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        headers = urllib3.HTTPHeaderDict()
        for name, value in request.headers.raw:
            headers.add(name.decode("latin-1"), value.decode("latin-1"))
        with _as_httpx_errors(request):
            answer = self._pool.urlopen(
                request.method,
                str(request.url),
                body=request.read() or None,
                headers=headers,
                redirect=False,
                retries=False,
                preload_content=False,
                decode_content=False,  # httpx decodes what Content-Encoding says, once
                timeout=urllib3.Timeout(connect=timeouts.get("connect"), read=timeouts.get("read")),
            )
        try:
            # As sent: http.client reads header bytes as latin-1, which gives them back.
            raw = [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in answer.headers.iteritems()
            ]
            return httpx.Response(
                answer.status,
                headers=raw,
                stream=_Body(answer, request),
                extensions={"http_version": b"HTTP/1.1"},
            )
        except BaseException:
            answer.close()
            answer.release_conn()
            raise

    def close(self) -> None:
        self._pool.clear()


class _Body(httpx.SyncByteStream):
    def __init__(self, answer: urllib3.BaseHTTPResponse, request: httpx.Request) -> None:
        self._answer = answer
        self._request = request
        self._read_whole = False

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx_errors(self._request):
            if self._answer.length_remaining is not None:
                yield self._answer.read(decode_content=False)  # one buffer, its length known
            elif self._answer.chunked:
                yield from self._answer.stream(_STREAM_PIECE, decode_content=False)
            else:  # it ends when the connection does: what has arrived, as it does
                while piece := self._answer.read1(_STREAM_PIECE, decode_content=False):
                    yield piece
        self._read_whole = True

    def close(self) -> None:
        if not self._read_whole:
            # What is left of the body would be read as the next response on the connection.
            self._answer.close()
        self._answer.release_conn()


@contextmanager
def _as_httpx_errors(request: httpx.Request) -> Iterator[None]:
    """urllib3's failures raised as the httpx errors they are (`httpx.TransportError`s)."""
    try:
        yield
    except Urllib3Error as failure:
        raise translated(failure)(str(failure), request=request) from failure


def translated(failure: Urllib3Error) -> type[httpx.TransportError]:
    """The httpx error a urllib3 failure is. Only a failure known to come before anything
    was sent is a `ConnectError` (the client may send again what it did not deliver)."""
    # NewConnectionError is a ConnectTimeoutError too (for urllib3's own compatibility).
    if isinstance(failure, NewConnectionError):
        return httpx.ConnectError
    if isinstance(failure, ConnectTimeoutError):
        return httpx.ConnectTimeout
    if isinstance(failure, SSLError):
        # The server's certificate refused (during the handshake); any other TLS failure
        # may have come after the request went out.
        cause = failure.args[0] if failure.args else None
        refused = isinstance(cause, ssl.SSLCertVerificationError | ssl.CertificateError)
        return httpx.ConnectError if refused else httpx.ReadError
    if isinstance(failure, ReadTimeoutError):
        return httpx.ReadTimeout
    if isinstance(failure, ProtocolError):
        return httpx.RemoteProtocolError
    return httpx.NetworkError
