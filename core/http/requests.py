"""Turning a stream request into the protocol's values, without a server.

Everything here is pure: it reads a request's headers (starlette's `Headers`), query
(`QueryParams`) and, once read, its body, and returns typed values or raises the
`ProtocolError` the client is answered with. A write is parsed in two steps, headers first and
then the body (`CreateHeaders.with_body`, `AppendHeaders.with_body`), so a request whose
headers are refused is refused before its body is read, and the errors come in the order the
protocol's tests expect: content type, encoding, lifetime, fork, then the body.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from starlette.datastructures import Headers, QueryParams

from ..auth.decision import OPEN, Allowed
from ..protocol.append import AppendIntent
from ..protocol.errors import ProtocolError, bad_request
from ..protocol.headers import (
    DEFAULT_CONTENT_TYPE,
    JSON_LAYOUT_LINES,
    JSON_MEDIA_TYPE,
    PRODUCER_EPOCH,
    PRODUCER_ID,
    PRODUCER_SEQ,
    STREAM_CLOSED,
    STREAM_EXPIRES_AT,
    STREAM_FORK_OFFSET,
    STREAM_FORK_SUB_OFFSET,
    STREAM_FORKED_FROM,
    STREAM_JSON_LAYOUT,
    STREAM_RETENTION,
    STREAM_SEQ,
    STREAM_TTL,
    ProducerClaim,
    check_content_encoding,
    check_lifetime,
    is_json,
    is_true,
    parse_content_type,
    parse_expires_at,
    parse_producer,
    parse_stream_seq,
    parse_sub_offset,
    parse_ttl,
    single_value,
)
from ..protocol.jsonmode import join_messages, split_messages
from ..protocol.offsets import (
    ReadStart,
    StartKind,
    parse_position,
    parse_read_end,
    parse_read_start,
)
from ..protocol.paths import parse_stream_path
from ..protocol.retention import RetentionPolicy, parse_retention
from ..protocol.sse import data_event
from ..storage import CreateSpec, ForkRequest, Payload
from .envelope import encoded_size

CONTENT_TYPE = "Content-Type"
CONTENT_ENCODING = "Content-Encoding"
LIVE_MODES = ("long-poll", "sse")
_HOST = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
# The most one byte of a JSON message can grow to in a response: a line break inside an SSE
# event becomes an escaped newline plus a new "data: " prefix.
_WORST_EXPANSION = 8
_FRAMING_ROOM = 256


def header(headers: Headers, name: str) -> str | None:
    """The one value of a protocol header (None: absent); 400 when it is repeated."""
    return single_value(name, headers.getlist(name))


def forwarded_host(headers: Mapping[str, str]) -> str:
    """The host the client named, as a CDN passes it on (the nearest proxy's, when several
    appended theirs); "" when there is none."""
    return headers.get("x-forwarded-host", "").split(",")[0].strip()


def public_host(headers: Headers, server: tuple[str, int] | None) -> str:
    """The host to name in a URL for this request's client: the CDN's when the request came
    through one, else its Host (an HTTP/1.0 request's server address); 400 when that is not a
    valid host."""
    host = forwarded_host(headers) or headers.get("host")
    if host is None and server:
        host = "{}:{}".format(*server)
    if host is None or not _HOST.fullmatch(host):
        raise bad_request("the Host header is not a valid host")
    return host


def content_type(headers: Headers) -> str | None:
    value = header(headers, CONTENT_TYPE)
    return parse_content_type(value) if value is not None else None


# ---------------------------------------------------------------------------- forks


def fork_source(headers: Headers, base_path: str) -> str | None:
    """The path of the stream a create forks from (None: not a fork); 400 when the header
    names no stream of this server."""
    source = header(headers, STREAM_FORKED_FROM)
    return None if source is None else _fork_source(headers, base_path, source.strip())


def _fork_source(headers: Headers, base_path: str, value: str) -> str:
    """The source stream of a fork: a path on this server (an absolute URL is accepted only
    when it names this same host)."""
    prefix = base_path + "/"
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise bad_request("Stream-Forked-From must be the source stream's path") from exc
    if parts.scheme or parts.netloc:
        hosts = {headers.get("host", "").lower(), forwarded_host(headers).lower()}
        same_host = parts.netloc.lower() in hosts - {""}
        if parts.scheme not in {"http", "https"} or not same_host:
            raise bad_request("Stream-Forked-From must name a stream on this server: send its path")
    if parts.query or parts.fragment or not parts.path.startswith(prefix):
        raise bad_request(f"Stream-Forked-From must be a stream path under {prefix}")
    return parse_stream_path(unquote(parts.path[len(prefix) :]))


def parse_fork(headers: Headers, base_path: str) -> ForkRequest | None:
    """The fork a create asks for: its source, and where in the source it starts."""
    source = header(headers, STREAM_FORKED_FROM)
    offset = header(headers, STREAM_FORK_OFFSET)
    sub_offset = header(headers, STREAM_FORK_SUB_OFFSET)
    if source is None:
        if offset is not None or sub_offset is not None:
            raise bad_request("fork offsets need Stream-Forked-From")
        return None
    anchor = parse_position(offset.strip()) if offset is not None else None
    units = parse_sub_offset(sub_offset)
    if units > 0 and anchor is None:
        raise bad_request("Stream-Fork-Sub-Offset needs Stream-Fork-Offset")
    return ForkRequest(_fork_source(headers, base_path, source.strip()), anchor, units)


# ---------------------------------------------------------------------------- bodies


def parse_payload(
    body: bytes, content_type: str | None, *, allow_empty_array: bool, response_budget: int
) -> Payload:
    """A write's body as stored: the bytes, or a JSON stream's messages (each of which must
    fit in one response of `response_budget` bytes, or it could never be read back: 413)."""
    if not body:
        return Payload()
    if content_type is None or not is_json(content_type):
        return Payload(body)
    messages = split_messages(body, allow_empty_array=allow_empty_array)
    for message in messages:
        _check_readable(message, content_type, response_budget)
    return Payload(b"".join(messages), tuple(len(m) for m in messages))


def _check_readable(message: bytes, content_type: str, budget: int) -> None:
    """A JSON message is served whole, so it must fit in one response through the front
    door, alone, in every read mode."""
    if len(message) * _WORST_EXPANSION + _FRAMING_ROOM <= budget:
        return
    alone = join_messages([message])
    sizes = (
        # Served as text or, depending on how the stream's type is spelled, as base64.
        encoded_size(alone, JSON_MEDIA_TYPE),
        encoded_size(alone, DEFAULT_CONTENT_TYPE),
        encoded_size(data_event(alone, content_type), "text/event-stream"),
    )
    if max(sizes) > budget:
        raise ProtocolError(
            413,
            f"a JSON message of {len(message)} bytes would take {max(sizes)} bytes in a "
            f"response, more than the {budget} a response may carry",
        )


# ---------------------------------------------------------------------------- PUT


@dataclass(frozen=True)
class CreateHeaders:
    """What a create's headers ask for; the body is checked against it by `with_body`."""

    content_type: str | None  # None only for a fork, which takes its source's
    ttl: int | None
    expires_at: float | None
    closed: bool
    fork: ForkRequest | None
    retention: RetentionPolicy | None = None

    def with_body(self, body: bytes, response_budget: int) -> CreateSpec:
        if body and self.content_type is None:
            raise bad_request("a fork created with a body needs a Content-Type")
        payload = parse_payload(
            body, self.content_type, allow_empty_array=True, response_budget=response_budget
        )
        return CreateSpec(
            self.content_type,
            self.ttl,
            self.expires_at,
            self.closed,
            payload,
            self.fork,
            self.retention,
        )


def parse_create(headers: Headers, base_path: str, now: float | None = None) -> CreateHeaders:
    """A create's headers (`now`: the time its expiry is checked against)."""
    media = content_type(headers)
    check_content_encoding(header(headers, CONTENT_ENCODING))
    ttl = parse_ttl(header(headers, STREAM_TTL))
    expires_at = parse_expires_at(header(headers, STREAM_EXPIRES_AT))
    check_lifetime(ttl, expires_at, time.time() if now is None else now)
    fork = parse_fork(headers, base_path)
    if fork is None and media is None:
        media = DEFAULT_CONTENT_TYPE
    closed = is_true(header(headers, STREAM_CLOSED))
    retention = parse_retention(header(headers, STREAM_RETENTION))
    if retention is not None and retention.compact and media is not None and not is_json(media):
        raise bad_request(f"{STREAM_RETENTION}: compact folds JSON streams only")
    return CreateHeaders(media, ttl, expires_at, closed, fork, retention)


# ---------------------------------------------------------------------------- POST


@dataclass(frozen=True)
class AppendHeaders:
    """What an append's headers ask for. Its Content-Type is read only with a body: a
    close-only request is never refused for it (the protocol's rule)."""

    close: bool
    producer: ProducerClaim | None
    stream_seq: str | None
    content_type_values: tuple[str, ...]

    def with_body(self, body: bytes, response_budget: int) -> tuple[AppendIntent, Payload]:
        if not body and not self.close:
            raise bad_request("an append needs a body (or Stream-Closed: true to close)")
        media = None
        if body:
            value = single_value(CONTENT_TYPE, list(self.content_type_values))
            media = parse_content_type(value) if value is not None else None
            if media is None:
                raise bad_request("an append with a body needs a Content-Type")
        payload = parse_payload(
            body, media, allow_empty_array=False, response_budget=response_budget
        )
        intent = AppendIntent(media, bool(body), self.close, self.stream_seq, self.producer)
        return intent, payload


def parse_append(headers: Headers) -> AppendHeaders:
    close = is_true(header(headers, STREAM_CLOSED))
    producer = parse_producer(
        header(headers, PRODUCER_ID), header(headers, PRODUCER_EPOCH), header(headers, PRODUCER_SEQ)
    )
    stream_seq = parse_stream_seq(header(headers, STREAM_SEQ))
    check_content_encoding(header(headers, CONTENT_ENCODING))
    return AppendHeaders(close, producer, stream_seq, tuple(headers.getlist(CONTENT_TYPE)))


# ---------------------------------------------------------------------------- GET


@dataclass(frozen=True)
class ReadRequest:
    start: ReadStart
    live: str | None  # None (catch-up), "long-poll" or "sse"
    cursor: str | None
    if_none_match: str | None
    until: int | None = None  # the extension's bound: read nothing at or past this position
    access: Allowed = OPEN  # how the reader was let in: decides who may cache the answer
    # When the read decided where retained data starts (a cut pending then bounds how long
    # its answer may be cached, even if the cut takes effect while it is being served).
    decided_at: float | None = None
    json_lines: bool = False  # a JSON stream's array is laid out a message per line

    @property
    def from_now(self) -> bool:
        return self.start.kind is StartKind.NOW


def parse_read(query: QueryParams, headers: Headers) -> ReadRequest:
    """A read's parameters. The names of the query's parameters were checked with every
    cache-key parameter's (`core.app`), before this."""
    live_values = query.getlist("live")
    live = live_values[0] if live_values else None
    if len(live_values) > 1 or (live is not None and live not in LIVE_MODES):
        raise bad_request("live must be long-poll or sse")
    offsets = query.getlist("offset")
    if live is not None and not offsets:
        raise bad_request("live reads need an offset")
    cursors = query.getlist("cursor")
    if len(cursors) > 1:
        raise bad_request("cursor may be given once")
    start = parse_read_start(offsets)
    return ReadRequest(
        start=start,
        live=live,
        cursor=cursors[0] if cursors else None,
        if_none_match=headers.get("if-none-match"),
        until=parse_read_end(query.getlist("until"), start, live),
        json_lines=_json_lines(headers, live),
    )


def _json_lines(headers: Headers, live: str | None) -> bool:
    """Whether a read asks for the line layout (`Stream-Json-Layout: lines`)."""
    values = headers.getlist(STREAM_JSON_LAYOUT)
    if not values:
        return False
    if len(values) > 1 or values[0].strip().lower() != JSON_LAYOUT_LINES:
        raise bad_request(f"{STREAM_JSON_LAYOUT} may be given once, as {JSON_LAYOUT_LINES!r}")
    if live is not None:
        raise bad_request(f"{STREAM_JSON_LAYOUT} applies to catch-up reads only")
    return True
