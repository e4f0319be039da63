"""The stream endpoints: each reads as parse -> validate -> execute -> respond.

Everything a response needs from the request (including its Location) is parsed and checked
before the store is called, so a request is refused whole or executed whole: building the
answer to a write that has been committed cannot fail.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import quote, unquote, urlsplit

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive

from ..auth.decision import OPEN, Allowed
from ..config import Settings
from ..protocol import caching
from ..protocol.append import AppendIntent
from ..protocol.caching import ReadMode, ReadShape
from ..protocol.cursor import next_cursor
from ..protocol.errors import ProtocolError, bad_request
from ..protocol.headers import (
    DEFAULT_CONTENT_TYPE,
    JSON_MEDIA_TYPE,
    PRODUCER_EPOCH,
    PRODUCER_ID,
    PRODUCER_SEQ,
    STREAM_CLOSED,
    STREAM_CURSOR,
    STREAM_EXPIRES_AT,
    STREAM_FORK_OFFSET,
    STREAM_FORK_SUB_OFFSET,
    STREAM_FORKED_FROM,
    STREAM_SEQ,
    STREAM_SSE_DATA_ENCODING,
    STREAM_TTL,
    STREAM_UP_TO_DATE,
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
from ..protocol.limits import append_too_large
from ..protocol.offsets import (
    ReadStart,
    StartKind,
    parse_position,
    parse_read_end,
    parse_read_start,
)
from ..protocol.paths import parse_stream_path
from ..protocol.sse import data_event, uses_base64
from ..storage import (
    CreateSpec,
    CreateStatus,
    ForkRequest,
    Payload,
    Presence,
    ReadBatch,
    StoreUnavailable,
    StreamInfo,
    StreamStore,
)
from ..telemetry import Metric, NoTelemetry, Telemetry
from . import responses as r
from .bodies import read_within
from .disconnect import CLIENT_GONE, unless_client_leaves
from .envelope import SSE_CONTROL_ALLOWANCE, encoded_size, fit_read
from .live import SharedReads, TailWatcher
from .offload import offload, run_here
from .sse import SsePlan, SseSessions
from .wakeups import Wakeups

logger = logging.getLogger("dsaws")
_HOST = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
# The most one byte of a JSON message can grow to in a response: a line break inside an SSE
# event becomes an escaped newline plus a new "data: " prefix.
_WORST_EXPANSION = 8
_FRAMING_ROOM = 256


# A read at an offset whose range is still pending waits this long at most: beyond the bound
# after which a dead writer's range is voided (`core.storage._ranges`).
PENDING_WAIT_SECONDS = 3.0


class ChangeListener(Protocol):
    """Who is told of committed writes (the subscriptions)."""

    def unconcerned(self, path: str) -> bool:
        """True when nothing need be done for `path`, decided without I/O."""
        ...

    def changed(self, path: str) -> None:
        """The full notice: may read the store and queue work (blocking)."""
        ...


@dataclass(frozen=True)
class ReadRequest:
    start: ReadStart
    live: str | None
    cursor: str | None
    if_none_match: str | None
    until: int | None = None  # the extension's bound: read nothing at or past this position
    access: Allowed = OPEN  # how the reader was let in: decides who may cache the answer

    @property
    def from_now(self) -> bool:
        return self.start.kind is StartKind.NOW


_SSE_SHAPE = ReadShape(ReadMode.SSE, has_data=False, at_tail=False, closed=False)
_READ_MODES = {None: ReadMode.CATCH_UP, "long-poll": ReadMode.LONG_POLL, "sse": ReadMode.SSE}


def _only_waits(info: StreamInfo, read: ReadRequest) -> bool:
    """Whether a live read of `info` would wait at its tail: the stream is there and open, and
    the read starts exactly at its tail. Anything else (a 404 or 410, data to send, a close to
    report, an expiry) must be decided on a fresh check."""
    return (
        not info.soft_deleted
        and not info.closed
        and not info.is_expired(time.time())
        and read.start.resolve(info.tail) == info.tail
    )


def _read_mode(read: ReadRequest) -> ReadMode:
    return _READ_MODES[read.live]


class StreamEndpoints:
    def __init__(
        self,
        settings: Settings,
        store: StreamStore,
        wakeups: Wakeups,
        telemetry: Telemetry | None = None,
        store_in_process: bool = False,
    ) -> None:
        self.settings = settings
        self.store = store
        # A store that answers in this process without waiting (the embedded emulator) is
        # called on the event loop: handing each call to a thread and back cost a third of
        # an append's time under load, all of it spent on the one interpreter lock. Calls
        # that may wait for other requests (an idempotent producer's, for its predecessors)
        # still go to a thread.
        self.call_store = run_here if store_in_process else offload
        self.wakeups = wakeups
        self.telemetry: Telemetry = telemetry or NoTelemetry()
        # Told of every committed write that moved a tail (the subscriptions' notices).
        self.on_change: ChangeListener | None = None
        self.watcher = TailWatcher(store, wakeups, settings.poll_interval)
        self.reads = SharedReads(store)
        self.sse = SseSessions(
            self.reads,
            self.watcher,
            settings.max_read_bytes,
            settings.max_response_bytes - SSE_CONTROL_ALLOWANCE,
            self._cursor_for,
        )
        self.long_polls_waiting = 0  # long-polls now waiting at a tail, for tests to see

    # ------------------------------------------------------------------ PUT

    async def create(self, request: Request, path: str) -> Response:
        spec = await self._parse_create(request)
        location = self._location(request, path)

        outcome = await self.call_store(self.store.create, path, spec)
        # Shared checks begun before the create must no longer answer readers of the path.
        self.wakeups.notify(path)
        if outcome.status is CreateStatus.CREATED and spec.payload.data:
            await self._changed(path)

        return r.create_response(outcome, location)

    async def _parse_create(self, request: Request) -> CreateSpec:
        content_type = _content_type(request)
        check_content_encoding(_header(request, "Content-Encoding"))
        ttl = parse_ttl(_header(request, STREAM_TTL))
        expires_at = parse_expires_at(_header(request, STREAM_EXPIRES_AT))
        check_lifetime(ttl, expires_at, time.time())
        fork = self._parse_fork(request)
        if fork is None and content_type is None:
            content_type = DEFAULT_CONTENT_TYPE
        closed = is_true(_header(request, STREAM_CLOSED))
        body = await self._body(request)
        if body and content_type is None:
            raise bad_request("a fork created with a body needs a Content-Type")
        payload = self._payload(body, content_type, allow_empty_array=True)
        return CreateSpec(content_type, ttl, expires_at, closed, payload, fork)

    def _parse_fork(self, request: Request) -> ForkRequest | None:
        source = _header(request, STREAM_FORKED_FROM)
        offset = _header(request, STREAM_FORK_OFFSET)
        sub_offset = _header(request, STREAM_FORK_SUB_OFFSET)
        if source is None:
            if offset is not None or sub_offset is not None:
                raise bad_request("fork offsets need Stream-Forked-From")
            return None
        anchor = parse_position(offset.strip()) if offset is not None else None
        units = parse_sub_offset(sub_offset)
        if units > 0 and anchor is None:
            raise bad_request("Stream-Fork-Sub-Offset needs Stream-Fork-Offset")
        return ForkRequest(self._fork_source(request, source.strip()), anchor, units)

    def fork_source(self, request: Request) -> str | None:
        """The path of the stream a create forks from (None: not a fork); 400 when the
        header names no stream of this server."""
        source = _header(request, STREAM_FORKED_FROM)
        return None if source is None else self._fork_source(request, source.strip())

    def _fork_source(self, request: Request, value: str) -> str:
        """The source stream of a fork: a path on this server (an absolute URL is accepted
        only when it names this same host)."""
        prefix = self.settings.base_path + "/"
        try:
            parts = urlsplit(value)
        except ValueError as exc:
            raise bad_request("Stream-Forked-From must be the source stream's path") from exc
        if parts.scheme or parts.netloc:
            hosts = {request.headers.get("host", "").lower(), _forwarded_host(request).lower()}
            same_host = parts.netloc.lower() in hosts - {""}
            if parts.scheme not in {"http", "https"} or not same_host:
                raise bad_request(
                    "Stream-Forked-From must name a stream on this server: send its path"
                )
        if parts.query or parts.fragment or not parts.path.startswith(prefix):
            raise bad_request(f"Stream-Forked-From must be a stream path under {prefix}")
        return parse_stream_path(unquote(parts.path[len(prefix) :]))

    def stream_url(self, request: Request, path: str) -> str:
        return self._location(request, path)

    def _location(self, request: Request, path: str) -> str:
        """The new stream's URL: percent-encoded, on the host the client named (the CDN's, when
        the request came through one: it passes the viewer's Host as X-Forwarded-Host)."""
        host = _forwarded_host(request) or request.headers.get("host")
        if host is None and request.scope.get("server"):
            host = "{}:{}".format(*request.scope["server"])  # an HTTP/1.0 request
        if host is None or not _HOST.fullmatch(host):
            raise bad_request("the Host header is not a valid host")
        scheme = request.scope.get("scheme")
        scheme = scheme if scheme in {"http", "https"} else "https"
        return f"{scheme}://{host}{self.settings.base_path}/{quote(path)}"

    # ------------------------------------------------------------------ POST

    async def append(self, request: Request, path: str) -> Response:
        intent, payload = await self._parse_append(request)

        # A producer's request may wait for its predecessors: never on the event loop.
        call = offload if intent.producer is not None else self.call_store
        outcome = await call(self.store.append, path, intent, payload)

        if outcome.presence is Presence.NOT_FOUND:
            return r.not_found()
        if outcome.presence is Presence.GONE:
            return r.gone()
        if outcome.decision is not None and outcome.decision.commits:
            self.wakeups.notify(path)
            self.telemetry.count(Metric.APPENDS)
            self.telemetry.count(Metric.BYTES_APPENDED, len(payload))
            if payload.data:
                await self._changed(path)
        return r.append_response(outcome, intent)

    async def _changed(self, path: str) -> None:
        """Tell the subscriptions; the write is committed and acknowledged whatever they
        answer (a lost notice is found by their sweep)."""
        if self.on_change is None:
            return
        try:
            # Usually answered from memory, with no trip to a worker thread.
            if not self.on_change.unconcerned(path):
                await self.call_store(self.on_change.changed, path)
        except Exception:
            logger.exception("subscription notice for %s failed", path)

    async def _parse_append(self, request: Request) -> tuple[AppendIntent, Payload]:
        close = is_true(_header(request, STREAM_CLOSED))
        producer = parse_producer(
            _header(request, PRODUCER_ID),
            _header(request, PRODUCER_EPOCH),
            _header(request, PRODUCER_SEQ),
        )
        stream_seq = parse_stream_seq(_header(request, STREAM_SEQ))
        check_content_encoding(_header(request, "Content-Encoding"))
        body = await self._body(request)
        if not body and not close:
            raise bad_request("an append needs a body (or Stream-Closed: true to close)")
        # A close-only request is never refused for its Content-Type (the protocol's rule).
        content_type = _content_type(request) if body else None
        if body and content_type is None:
            raise bad_request("an append with a body needs a Content-Type")
        payload = self._payload(body, content_type, allow_empty_array=False)
        return AppendIntent(content_type, bool(body), close, stream_seq, producer), payload

    # ------------------------------------------------------------------ HEAD

    async def head(self, path: str) -> Response:
        info = await self.call_store(self.store.get, path)
        if info is None:
            return r.bodyless(r.not_found())
        if info.soft_deleted:
            return r.bodyless(r.gone())
        headers = {**r.metadata_headers(info), "Cache-Control": caching.NO_STORE}
        return Response(status_code=200, headers=headers)

    # ------------------------------------------------------------------ DELETE

    async def delete(self, path: str) -> Response:
        presence = await self.call_store(self.store.delete, path)
        if presence is Presence.NOT_FOUND:
            return r.not_found()
        if presence is Presence.GONE:
            return r.gone()
        self.wakeups.notify(path)
        return Response(status_code=204)

    # ------------------------------------------------------------------ GET

    async def read(self, request: Request, path: str, access: Allowed = OPEN) -> Response:
        read = replace(_parse_read(request), access=access)
        info = await self._snapshot(path, read)
        if info is None:
            return r.not_found()
        if info.soft_deleted:
            return r.gone()
        position = read.start.resolve(info.tail)
        if info.tail < position <= info.reserved_end:
            # An offset an append was answered with, whose range (or one below it) is still
            # being filled: readable within moments, or voided within the bound.
            waited = await self._until_readable(path, position)
            if waited is None:
                return r.not_found()
            info = waited
        if position > info.tail:
            if not read.start.whole:
                raise bad_request("offset is past the end of the stream")
            # A plain offset past the tail lies inside the append still to come: read from
            # where it will start (the Yjs layer asks for its snapshot's offset plus one, and
            # nothing may have been written since).
            position = info.tail
        if info.ttl_seconds is not None:  # only a sliding TTL is ever renewed by a read
            await self.call_store(self.store.renew, info)
        self.telemetry.count(Metric.READS)

        if read.live == "sse":
            return await self._sse(path, info, position, read)
        if read.live == "long-poll":
            return await self._long_poll(path, info, position, read, request.receive)
        if read.start.kind is StartKind.NOW:
            return self._tail_response(info, read, status=200)
        bound = None if read.until is None else min(read.until, info.tail)
        return await self._data_response(info, position, read, bound)

    async def _until_readable(self, path: str, position: int) -> StreamInfo | None:
        """The stream once its readable data reaches `position`, which ranges still pending
        hold back (checks shared with the other readers of the stream, soon after each other
        at first); `StoreUnavailable` if that takes longer than a dead writer's range takes
        to be voided."""
        deadline = time.monotonic() + PENDING_WAIT_SECONDS
        pause = 0.005
        while True:
            await asyncio.sleep(pause)
            pause = min(pause * 2, self.settings.poll_interval)
            info = await self.watcher.checks.get(path, not_before=time.monotonic())
            if info is None or info.soft_deleted or info.tail >= position:
                return info
            if time.monotonic() > deadline:
                raise StoreUnavailable("appends below this offset are still being written")

    async def _snapshot(self, path: str, read: ReadRequest) -> StreamInfo | None:
        """The stream item for this read: a check begun after the read arrived (shared with the
        readers that arrive with it), so it sees every change acknowledged before, here or
        elsewhere. Except for a live read that would only wait at the tail of a live stream:
        for it a shared check up to a poll interval old serves (`snapshot_for_waiting`), since
        waiting is all it would do with a fresher one until the next poll."""
        if read.live is not None and read.start.kind is not StartKind.NOW:
            shared = await self.watcher.snapshot_for_waiting(path)
            if shared is not None and _only_waits(shared, read):
                return shared
        return await self.watcher.checks.get(path, not_before=time.monotonic())

    async def _long_poll(
        self, path: str, info: StreamInfo, position: int, read: ReadRequest, receive: Receive
    ) -> Response:
        latest: StreamInfo | None = info
        if info.tail <= position and not info.closed:
            self.telemetry.count(Metric.LONG_POLL_WAITS)
            self.long_polls_waiting += 1
            try:
                waited = await unless_client_leaves(
                    receive,
                    self.watcher.wait_for_change(path, position, self.settings.long_poll_timeout),
                )
            finally:
                self.long_polls_waiting -= 1
            if waited is CLIENT_GONE:
                return r.client_gone()
            latest = waited
            if latest is not None and (latest.tail > position or latest.closed):
                self.telemetry.count(Metric.LONG_POLL_WAKES)
            if latest is None:
                return r.not_found()
            if latest.soft_deleted:
                return r.gone()
        if latest.tail > position:
            return await self._data_response(latest, position, read, shared=True)
        return self._tail_response(latest, read, status=204)

    async def _sse(self, path: str, info: StreamInfo, position: int, read: ReadRequest) -> Response:
        window = self.settings.sse_mode == "window"
        lifetime = self.settings.sse_window_seconds if window else self.settings.sse_lifetime
        plan = SsePlan(
            path,
            position,
            lifetime,
            stop_after_data=window,
            client_cursor=read.cursor,
            whole=read.start.whole,
        )
        headers = {
            "Content-Type": "text/event-stream",
            "Cache-Control": caching.read_cache_control(
                self.settings.cache_rules, _SSE_SHAPE, None
            ),
            # nginx (the local CDN) passes an SSE stream through as it is written.
            "X-Accel-Buffering": "no",
        }
        if uses_base64(info.content_type):
            headers[STREAM_SSE_DATA_ENCODING] = "base64"
        events = self.sse.events(info, plan)
        if window:
            body = b"".join([event async for event in events])
            return Response(body, status_code=200, headers=headers)
        return StreamingResponse(events, status_code=200, headers=headers)

    async def _data_response(
        self,
        info: StreamInfo,
        position: int,
        read: ReadRequest,
        bound: int | None = None,
        shared: bool = False,
    ) -> Response:
        """Data from `position`, up to the tail or to `bound` (the `until` extension). The
        long-polls a change wakes at one offset read it once (`shared`). A plain offset inside
        an append reads from that append's start, so the response may begin before
        `position`."""
        whole = read.start.whole
        most = self._read_size(position, read)
        if shared:
            batch = await self.reads.read(info, position, most, whole)
        elif bound is None:
            batch = await self.call_store(self.store.read, info, position, most, whole)
        elif bound > position:
            most = min(most, bound - position)
            batch = await self.call_store(self.store.read, info, position, most, whole)
            batch = batch.before(bound)
            if batch.end == batch.start:
                raise bad_request("until is not at a message boundary")
        else:
            empty = () if is_json(info.content_type) else None
            # Nothing to return: the offset handed back is the one asked at, exact or not.
            exact = read.start.kind is StartKind.POSITION and not whole
            batch = ReadBatch(position, position, messages=empty, exact_empty=exact)
        batch, body = fit_read(
            batch,
            r.read_body,
            info.content_type,
            self.settings.max_response_bytes,
            text=not uses_base64(info.content_type),
        )
        up_to_date = batch.end >= info.tail
        closed = info.closed and up_to_date
        headers = {
            "Content-Type": info.content_type,
            **r.offset_headers(batch.end, closed, batch.inside),
        }
        if up_to_date:
            headers[STREAM_UP_TO_DATE] = "true"
        if read.live is not None and not closed:
            headers[STREAM_CURSOR] = self._cursor(batch.end, read)
        tag = caching.etag(info.incarnation, batch.start, batch.end, closed)
        headers["ETag"] = tag
        shape = ReadShape(
            _read_mode(read), batch.end > batch.start, up_to_date, closed, read.from_now
        )
        headers["Cache-Control"] = self._cache_control(info, shape, read.access)
        if caching.etag_matches(read.if_none_match, tag):
            headers.pop("Content-Type")
            return Response(status_code=304, headers=headers)
        return Response(body, status_code=200, headers=headers)

    def _read_size(self, position: int, read: ReadRequest) -> int:
        """How much a response may carry. A catch-up read from the stream's start may fill a
        whole response (the front door's limit: one request reads a whole stream up to that
        size, as clients that make exactly one request need); every other read, and every
        live one, takes `max_read_bytes`, so catching up on a long stream through a CDN
        fetches the same bytes from the origin as before (see the README's "Reads")."""
        settings = self.settings
        if position == 0 and read.live is None:
            return max(
                settings.max_read_bytes,
                settings.max_read_from_start_bytes or settings.max_response_bytes,
            )
        return settings.max_read_bytes

    def _tail_response(self, info: StreamInfo, read: ReadRequest, status: int) -> Response:
        """Nothing to return: the client is at the tail (offset=now, or a long-poll)."""
        shape = ReadShape(_read_mode(read), False, True, info.closed, read.from_now)
        headers = {
            **r.stream_headers(info),
            STREAM_UP_TO_DATE: "true",
            "Cache-Control": self._cache_control(info, shape, read.access),
        }
        if read.live is not None and not info.closed:
            headers[STREAM_CURSOR] = self._cursor(info.tail, read)
        if status == 204:
            return Response(status_code=204, headers=headers)
        body = b"[]" if is_json(info.content_type) else b""
        return Response(body, status_code=status, headers=headers)

    def _cursor(self, position: int, read: ReadRequest) -> str:
        return self._cursor_for(position, read.cursor)

    @staticmethod
    def _cursor_for(position: int, client_cursor: str | None) -> str:
        return next_cursor(time.time(), client_cursor, position)

    def _cache_control(self, info: StreamInfo, shape: ReadShape, access: Allowed) -> str:
        """Shared caches keep what anyone may read; a token's reads are the bearer's alone,
        and a signed URL's reads are kept no longer than the URL is valid."""
        rules = self.settings.cache_rules
        if access.private:
            rules = replace(rules, visibility="private")
        ends = [t for t in (info.expiry_time(), access.valid_until) if t is not None]
        seconds_left = min(ends) - time.time() if ends else None
        return caching.read_cache_control(rules, shape, seconds_left)

    # ------------------------------------------------------------------ helpers

    async def _body(self, request: Request) -> bytes:
        """The request body, refused with 413 as soon as it passes the append limit."""
        limit = self.settings.max_append_bytes
        body = await read_within(request, limit)
        if body is None:
            raise ProtocolError(413, append_too_large(limit))
        return body

    def _payload(
        self, body: bytes, content_type: str | None, *, allow_empty_array: bool
    ) -> Payload:
        if not body:
            return Payload()
        if content_type is None or not is_json(content_type):
            return Payload(body)
        messages = split_messages(body, allow_empty_array=allow_empty_array)
        for message in messages:
            self._check_readable(message, content_type)
        return Payload(b"".join(messages), tuple(len(m) for m in messages))

    def _check_readable(self, message: bytes, content_type: str) -> None:
        """A JSON message is served whole, so it must fit in one response through the front
        door, alone, in every read mode; one that could never be read back is refused."""
        budget = self.settings.max_response_bytes - SSE_CONTROL_ALLOWANCE
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


def _header(request: Request, name: str) -> str | None:
    return single_value(name, request.headers.getlist(name))


def _forwarded_host(request: Request) -> str:
    """The host the client named, as a CDN passes it on (the nearest proxy's, when several
    appended theirs); "" when there is none."""
    return request.headers.get("x-forwarded-host", "").split(",")[0].strip()


def _content_type(request: Request) -> str | None:
    value = _header(request, "Content-Type")
    return parse_content_type(value) if value is not None else None


def _parse_read(request: Request) -> ReadRequest:
    # The names of the read parameters were checked with every cache-key parameter's (app).
    query = request.query_params
    live_values = query.getlist("live")
    live = live_values[0] if live_values else None
    if len(live_values) > 1 or live not in {None, "long-poll", "sse"}:
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
        if_none_match=request.headers.get("if-none-match"),
        until=parse_read_end(query.getlist("until"), start, live),
    )
