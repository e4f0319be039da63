"""The protocol as requests and answers, without I/O: the sync and async clients send what
these functions build and hand back what the server said."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from ._errors import (
    AccessDenied,
    BadRequest,
    DurableStreamError,
    OffsetGone,
    SequenceConflict,
    StreamClosed,
    StreamConflict,
    StreamGone,
    StreamNotFound,
    Unavailable,
    UntilNotSupported,
)
from ._offset import Offset

JSON = "application/json"
Live = Literal["long-poll", "sse", "auto"] | None
# What a read does when its offset was dropped under the stream's retention policy (410 with
# Stream-Earliest-Offset): raise `OffsetGone`, or go on from the earliest offset still kept.
OnGone = Literal["raise", "earliest"]
EARLIEST_OFFSET = "Stream-Earliest-Offset"
RETENTION = "Stream-Retention"
HeaderSource = Mapping[str, str] | Callable[[], Mapping[str, str]] | None
TokenSource = str | Callable[[], str] | None


@dataclass(frozen=True)
class Request:
    method: str
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    # May be sent again when no answer came back: repeating it cannot change the outcome.
    repeatable: bool = True
    # For a write: the stream's tail as last seen before it was sent. A 500 with the tail still
    # there proves the write was not applied (see `_attempts.after_check`).
    tail_before: Offset | None = None


@dataclass(frozen=True)
class StreamInfo:
    content_type: str
    next_offset: Offset
    closed: bool
    ttl: int | None = None
    expires_at: str | None = None
    # Where a read may start, when the stream's retention policy has dropped older data (the
    # server's Stream-Earliest-Offset; None when nothing was dropped, or the server does not
    # say). `retention` is the stream's policy as the server echoes it (`max-age=N; max-bytes=M`
    # or `compact`), None without one.
    earliest_offset: Offset | None = None
    retention: str | None = None


@dataclass(frozen=True)
class Batch:
    """What one read returned. `closed` is true only on the batch that reaches the end of a
    closed stream: once it has been handed over, the stream is fully consumed."""

    offset: Offset
    next_offset: Offset
    data: bytes
    # The Python values of a JSON stream's messages (None for other streams, and for a read
    # with decode=False).
    messages: list[Any] | None
    up_to_date: bool
    closed: bool
    # The HTTP status of the answer: 204 for a long-poll that ended without data (handed over
    # only with `read(idle=True)`; its `next_offset` is where the stream stands, which is
    # also what `Offset.NOW` resolved to on a read's first request).
    status: int = 200
    # Set on the first batch a read hands over after going on from the earliest offset
    # (`on_gone="earliest"`): the offset it had asked for, which the stream's retention policy
    # had dropped. What lay between it and this batch's `offset` was skipped.
    skipped_from: Offset | None = None


def is_json(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == JSON


def encode_json(value: Any) -> bytes:
    """One JSON value as compact UTF-8 (a TypeError for what JSON cannot hold)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def encode_messages(values: list[Any]) -> bytes:
    """A JSON append: the values as one array (each becomes one message)."""
    return encode_json(values)


def append_body(data: bytes | str | list[Any], content_type: str | None) -> tuple[str, bytes]:
    """What a plain append sends: a list as a JSON array of messages, text as UTF-8, bytes as
    they are; each with `content_type`, or the type its form implies."""
    if isinstance(data, list):
        return content_type or JSON, encode_messages(data)
    if isinstance(data, str):
        return content_type or "text/plain", data.encode()
    return content_type or "application/octet-stream", bytes(data)


def join_bodies(pieces: list[bytes], json_stream: bool) -> bytes:
    """One append's body from pieces sent together: for JSON, an array of the encoded values."""
    return b"[" + b",".join(pieces) + b"]" if json_stream else b"".join(pieces)


def check_read(
    live: object, until: Offset | None, on_gone: object = "raise", decode: bool = True
) -> None:
    if on_gone not in ("raise", "earliest"):
        raise ValueError(f"on_gone must be 'raise' or 'earliest', not {on_gone!r}")
    if live not in (None, "long-poll", "sse", "auto"):
        raise ValueError(f"live must be None, 'long-poll', 'sse' or 'auto', not {live!r}")
    if until is not None and live is not None:
        raise ValueError("until bounds catch-up reads only (live=None)")
    if until is not None and until.is_now:
        raise ValueError("until must be a position in the stream, not Offset.NOW")
    if not decode and live not in (None, "long-poll"):
        raise ValueError("decode=False is for catch-up and long-poll reads")


def check_stream_seq(stream_seq: object) -> None:
    """A `Stream-Seq` value: a non-empty string of visible ASCII (it travels as a header). The
    server compares them as strings, so numbers must be zero-padded to keep their order."""
    if not isinstance(stream_seq, str):
        raise TypeError(f"stream_seq must be a str, not {type(stream_seq).__name__}")
    if not stream_seq or not all("!" <= c <= "~" for c in stream_seq):
        raise ValueError(f"stream_seq must be non-empty visible ASCII, not {stream_seq!r}")


def resolve_headers(source: HeaderSource) -> dict[str, str]:
    if source is None:
        return {}
    return dict(source() if callable(source) else source)


def with_token(headers: HeaderSource, token: TokenSource) -> HeaderSource:
    """`headers` plus `Authorization: Bearer <token>`; a callable token is asked on every
    request, so a provider that refreshes its token before expiry is all a caller needs."""
    if token is None:
        return headers

    def source() -> dict[str, str]:
        value = token() if callable(token) else token
        return {**resolve_headers(headers), "Authorization": f"Bearer {value}"}

    return source


# ------------------------------------------------------------------ requests


def create_request(
    content_type: str,
    *,
    ttl: int | None = None,
    expires_at: str | None = None,
    closed: bool = False,
    body: bytes | None = None,
    forked_from: str | None = None,
    fork_offset: Offset | None = None,
    retention: str | None = None,
) -> Request:
    """A create. `retention` is sent as `Stream-Retention`: `max-age=<seconds>` and/or
    `max-bytes=<n>` (comma-separated), or `compact` (JSON streams); the server refuses (400)
    what it cannot read."""
    headers = {"Content-Type": content_type}
    if ttl is not None:
        headers["Stream-TTL"] = str(ttl)
    if expires_at is not None:
        headers["Stream-Expires-At"] = expires_at
    if closed:
        headers["Stream-Closed"] = "true"
    if forked_from is not None:
        headers["Stream-Forked-From"] = forked_from
    if fork_offset is not None:
        headers["Stream-Fork-Offset"] = fork_offset.token
    if retention is not None:
        headers[RETENTION] = retention
    # A create is idempotent (the same configuration again answers 200), unless it carries a
    # body, which a second attempt would find already written.
    return Request("PUT", headers, content=body, repeatable=not body)


def append_request(
    content_type: str,
    body: bytes,
    *,
    close: bool = False,
    producer: dict[str, str] | None = None,
    stream_seq: str | None = None,
    tail_before: Offset | None = None,
) -> Request:
    """An append (a close-only request, with no body, carries no Content-Type)."""
    headers = {"Content-Type": content_type} if body else {}
    headers |= producer or {}
    if stream_seq is not None:
        check_stream_seq(stream_seq)
        headers["Stream-Seq"] = stream_seq
    if close:
        headers["Stream-Closed"] = "true"
    return Request("POST", headers, content=body, repeatable=False, tail_before=tail_before)


def close_request() -> Request:
    """Closing a closed stream answers 204 again: a plain close may be repeated."""
    return Request("POST", {"Stream-Closed": "true"}, repeatable=True)


def read_request(
    offset: Offset, live: Live, cursor: str | None, until: Offset | None = None
) -> Request:
    params = {"offset": offset.token}
    if live is not None:
        params["live"] = live
    if cursor is not None:
        params["cursor"] = cursor
    if until is not None:
        params["until"] = until.token
    return Request("GET", params=params)


def target(url: str, params: Mapping[str, str]) -> httpx.URL:
    """The URL a request goes to: the stream's URL with the request's parameters added to
    whatever query it has (a signed URL's signature must survive a read's `offset`)."""
    return httpx.URL(url).copy_merge_params(dict(params)) if params else httpx.URL(url)


# ------------------------------------------------------------------ answers


def raise_for_status(response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    message = _message(response)
    if status == 404:
        raise StreamNotFound(message, status)
    if status == 410:
        raise _gone(response, message)
    if status == 409:
        if response.headers.get("Stream-Closed", "").lower() == "true":
            raise StreamClosed(message, status)
        if _sent_stream_seq(response) and "seq" in message.lower():
            raise SequenceConflict(message, status)
        raise StreamConflict(message, status)
    if status in (401, 403):
        raise AccessDenied(message, status)
    if status == 429 or status >= 500:
        raise Unavailable(message, status)
    if 400 <= status < 500:
        raise BadRequest(message, status)
    raise DurableStreamError(message, status)


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
        detail = body.get("message") or body.get("error") or response.text
    except (ValueError, AttributeError):
        # A HEAD answer has no body: a refusal's challenge still says why.
        detail = response.text or response.headers.get("WWW-Authenticate", "")
    status = f"{response.status_code} {response.reason_phrase}: {str(detail)[:500]}".strip()
    return f"{describe(response)} answered {status}"


def _gone(response: httpx.Response, message: str) -> StreamGone:
    """A 410: `OffsetGone` when it says the read's offset was dropped under the stream's
    retention policy (Stream-Earliest-Offset, or the body's `offset_gone`); else the stream
    itself was deleted."""
    try:
        body = response.json()
    except ValueError:
        body = None
    body = body if isinstance(body, dict) else {}
    header = response.headers.get(EARLIEST_OFFSET)
    if header is None and body.get("error") != "offset_gone":
        return StreamGone(message, 410)
    earliest = _offset_or_none(header if header is not None else body.get("earliest_offset"))
    asked = _offset_or_none(_sent_param(response, "offset"))
    said = f"offset {asked}" if asked is not None else "the offset read"
    where = (
        f"the earliest offset still kept is {earliest}: read from it (or from "
        f"Offset.BEGINNING, which starts there)"
        if earliest is not None
        else "read from Offset.BEGINNING (the earliest offset still kept)"
    )
    return OffsetGone(
        f"{describe(response)} answered 410 Gone: {said} is no longer kept (dropped under the "
        f"stream's retention policy); {where}, or pass on_gone='earliest' to go on from there",
        410,
        offset=asked,
        earliest_offset=earliest,
    )


def _offset_or_none(token: object) -> Offset | None:
    if not isinstance(token, str):
        return None
    try:
        return Offset(token.strip())
    except ValueError:
        return None


def _sent_param(response: httpx.Response, name: str) -> str | None:
    try:
        return response.request.url.params.get(name)
    except RuntimeError:  # an answer built by hand, as in tests
        return None


def restart_after_gone(
    response: httpx.Response, asked: Offset, on_gone: OnGone, until: Offset | None = None
) -> Offset | None:
    """Where a read at `asked` goes on from when it was answered 410 because its offset was
    dropped under the stream's retention policy and `on_gone` says to go on: the earliest
    offset still kept. None when the answer is to be raised instead (another answer, or a
    restart that would not move the read forward: a server that calls its own earliest offset
    gone, or a bounded read whose whole range was dropped)."""
    if on_gone != "earliest" or response.status_code != 410:
        return None
    gone = _gone(response, "")
    if not isinstance(gone, OffsetGone) or asked.is_now:
        return None
    earliest = gone.earliest_offset
    if earliest is None:  # not said: a read from the beginning starts at the earliest
        going = None if asked.is_beginning else Offset.BEGINNING
    else:
        going = earliest if earliest > asked else None
    if going is not None and until is not None and not going < until:
        return None
    return going


def describe(response: httpx.Response) -> str:
    """The request an answer belongs to, as "METHOD url" (the stream's URL, without the query
    string, which may carry a signed URL's signature): errors name the stream they are about."""
    try:
        request = response.request
    except RuntimeError:  # an answer built by hand, as in tests
        return "the request"
    return f"{request.method} {request.url.copy_with(query=None)}"


def _sent_stream_seq(response: httpx.Response) -> bool:
    try:
        return "Stream-Seq" in response.request.headers
    except RuntimeError:
        return False


def next_offset(response: httpx.Response) -> Offset:
    value = response.headers.get("Stream-Next-Offset")
    if value is None:
        raise DurableStreamError("the server sent no Stream-Next-Offset", response.status_code)
    return Offset(value)


def stream_info(response: httpx.Response) -> StreamInfo:
    ttl = response.headers.get("Stream-TTL")
    return StreamInfo(
        content_type=response.headers.get("Content-Type", ""),
        next_offset=next_offset(response),
        closed=response.headers.get("Stream-Closed", "").lower() == "true",
        ttl=int(ttl) if ttl and ttl.isdigit() else None,
        expires_at=response.headers.get("Stream-Expires-At"),
        earliest_offset=_offset_or_none(response.headers.get(EARLIEST_OFFSET)),
        retention=response.headers.get(RETENTION) or None,
    )


class ReadSession:
    """Where a reader stands and what to ask next: the offset, the cursor to echo, and whether
    the read is over (the end of a closed stream, or caught up for a catch-up read). With
    `idle`, a long-poll that ends without data is handed over as an empty batch (status 204)."""

    def __init__(
        self,
        start: Offset,
        live: Literal["long-poll"] | None,
        cursor: str | None = None,
        until: Offset | None = None,
        idle: bool = False,
        on_gone: OnGone = "raise",
        decode: bool = True,
    ) -> None:
        self.offset = start
        self.decode = decode  # parse a JSON stream's messages (or leave them to the caller)
        self.live = live
        self.cursor = cursor
        self.until = until
        self.idle = idle
        self.on_gone = on_gone
        # The offset a restart (`on_gone="earliest"`) skipped from, until a batch carries it.
        self.skipped_from: Offset | None = None
        self.content_type: str | None = None
        self.finished = False
        self.closed = False

    def follow(self) -> None:
        """Go on from where a catch-up read stopped, by long-poll (unless the stream ended)."""
        self.live = "long-poll"
        self.finished = self.closed

    def request(self) -> Request:
        return read_request(self.offset, self.live, self.cursor, self.until)

    def accept(self, response: httpx.Response) -> Batch | None:
        """The batch to hand over, if any; afterwards `finished` says whether to read on."""
        restart = restart_after_gone(response, self.offset, self.on_gone, self.until)
        if restart is not None:
            self.skipped_from = self.skipped_from or self.offset
            self.offset = restart
            return None
        raise_for_status(response)
        start = self.offset
        reached_to = next_offset(response)
        if self.until is not None and reached_to > self.until:
            # Offsets are opaque, so the bytes past the bound cannot be told apart from those
            # before it: handing over a part would be a guess, and all of it would break the
            # promise that a bounded read stops at its bound.
            raise UntilNotSupported(
                f"{describe(response)} ignored until={self.until}: it answered up to "
                f"{reached_to}, past the bound (the server lacks the until extension); "
                f"nothing of that answer was handed over, the read stands at {start}",
                response.status_code,
            )
        self.offset = reached_to
        self.cursor = response.headers.get("Stream-Cursor", self.cursor)
        closed = response.headers.get("Stream-Closed", "").lower() == "true"
        up_to_date = closed or response.headers.get("Stream-Up-To-Date", "").lower() == "true"
        self.closed = closed
        reached = self.until is not None and self.offset == self.until
        if closed or reached or (self.live is None and up_to_date):
            self.finished = True
        if response.status_code == 204:
            if not closed and not self.idle:
                return None
            data = b""
        else:
            data = response.content
        self.content_type = response.headers.get("Content-Type", self.content_type)
        json_stream = is_json(self.content_type)
        messages = None
        if json_stream and self.decode:
            messages = json.loads(data) if data else []
        skipped, self.skipped_from = self.skipped_from, None
        return Batch(
            start, self.offset, data, messages, up_to_date, closed, response.status_code, skipped
        )
