"""The stream endpoints: each reads as parse -> validate -> execute -> respond."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..config import Settings
from ..protocol import caching
from ..protocol.append import AppendIntent
from ..protocol.cursor import next_cursor
from ..protocol.errors import ProtocolError, bad_request
from ..protocol.headers import (
    DEFAULT_CONTENT_TYPE,
    is_json,
    is_true,
    parse_expires_at,
    parse_producer,
    parse_sub_offset,
    parse_ttl,
)
from ..protocol.jsonmode import join_messages, split_messages
from ..protocol.offsets import (
    ReadStart,
    StartKind,
    parse_position,
    parse_read_start,
)
from ..protocol.sse import uses_base64
from ..storage import (
    CreateSpec,
    CreateStatus,
    ForkRequest,
    Payload,
    Presence,
    StreamInfo,
    StreamStore,
)
from ..telemetry import Metric, NoTelemetry, Telemetry
from . import responses as r
from .live import TailWatcher
from .sse import SsePlan, SseSessions
from .wakeups import Wakeups

_MAX_PATH_LENGTH = 1024


@dataclass(frozen=True)
class ReadRequest:
    start: ReadStart
    live: str | None
    cursor: str | None
    if_none_match: str | None


class StreamEndpoints:
    def __init__(
        self,
        settings: Settings,
        store: StreamStore,
        wakeups: Wakeups,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.wakeups = wakeups
        self.telemetry: Telemetry = telemetry or NoTelemetry()
        self.watcher = TailWatcher(store, wakeups, settings.poll_interval)
        self.sse = SseSessions(store, self.watcher, settings.max_read_bytes, self._cursor_for)

    # ------------------------------------------------------------------ PUT

    async def create(self, request: Request, path: str) -> Response:
        content_type = request.headers.get("content-type")
        ttl = parse_ttl(request.headers.get(r.STREAM_TTL))
        expires_at = parse_expires_at(request.headers.get(r.STREAM_EXPIRES_AT))
        if ttl is not None and expires_at is not None:
            raise bad_request("send either Stream-TTL or Stream-Expires-At, not both")
        fork = self._parse_fork(request)
        if fork is None and content_type is None:
            content_type = DEFAULT_CONTENT_TYPE
        closed = is_true(request.headers.get(r.STREAM_CLOSED))
        body = await self._body(request)
        if body and content_type is None:
            raise bad_request("a fork created with a body needs a Content-Type")
        payload = _payload(body, content_type, allow_empty_array=True)
        spec = CreateSpec(content_type, ttl, expires_at, closed, payload, fork)

        outcome = await run_in_threadpool(self.store.create, path, spec)

        if outcome.status in _CREATE_REJECTIONS:
            status, code, message = _CREATE_REJECTIONS[outcome.status]
            if (
                outcome.info is not None
                and outcome.status is CreateStatus.CONFLICT
                and (outcome.info.soft_deleted)
            ):
                message = "a deleted stream with live forks still holds this path"
            return r.error(status, code, message)
        assert outcome.info is not None
        headers = r.stream_headers(outcome.info)
        if outcome.status is CreateStatus.CREATED:
            headers["Location"] = str(request.url.replace(query=""))
            return Response(status_code=201, headers=headers)
        return Response(status_code=200, headers=headers)

    def _parse_fork(self, request: Request) -> ForkRequest | None:
        source = request.headers.get("stream-forked-from")
        offset = request.headers.get("stream-fork-offset")
        sub_offset = request.headers.get("stream-fork-sub-offset")
        if source is None:
            if offset is not None or sub_offset is not None:
                raise bad_request("fork offsets need Stream-Forked-From")
            return None
        prefix = self.settings.base_path + "/"
        source_path = source.strip()
        if "://" in source_path:
            source_path = urlsplit(source_path).path
        if not source_path.startswith(prefix):
            raise bad_request(f"Stream-Forked-From must be a stream path under {prefix}")
        anchor = parse_position(offset.strip()) if offset is not None else None
        units = parse_sub_offset(sub_offset)
        if units > 0 and anchor is None:
            raise bad_request("Stream-Fork-Sub-Offset needs Stream-Fork-Offset")
        return ForkRequest(validate_path(unquote(source_path[len(prefix) :])), anchor, units)

    # ------------------------------------------------------------------ POST

    async def append(self, request: Request, path: str) -> Response:
        close = is_true(request.headers.get(r.STREAM_CLOSED))
        producer = parse_producer(
            request.headers.get(r.PRODUCER_ID),
            request.headers.get(r.PRODUCER_EPOCH),
            request.headers.get(r.PRODUCER_SEQ),
        )
        content_type = request.headers.get("content-type")
        stream_seq = request.headers.get(r.STREAM_SEQ)
        body = await self._body(request)
        if not body and not close:
            raise bad_request("an append needs a body (or Stream-Closed: true to close)")
        if body and not content_type:
            raise bad_request("an append with a body needs a Content-Type")
        payload = _payload(body, content_type, allow_empty_array=False) if body else Payload()
        intent = AppendIntent(content_type, bool(body), close, stream_seq, producer)

        outcome = await run_in_threadpool(self.store.append, path, intent, payload)

        if outcome.presence is Presence.NOT_FOUND:
            return r.not_found()
        if outcome.presence is Presence.GONE:
            return r.gone()
        if outcome.decision is not None and outcome.decision.commits:
            self.wakeups.notify(path)
            self.telemetry.count(Metric.APPENDS)
            self.telemetry.count(Metric.BYTES_APPENDED, len(payload))
        return r.append_response(outcome, intent)

    # ------------------------------------------------------------------ HEAD

    async def head(self, path: str) -> Response:
        info = await run_in_threadpool(self.store.get, path)
        if info is None:
            return _bodyless(r.not_found())
        if info.soft_deleted:
            return _bodyless(r.gone())
        headers = {**r.metadata_headers(info), "Cache-Control": caching.NO_STORE}
        return Response(status_code=200, headers=headers)

    # ------------------------------------------------------------------ DELETE

    async def delete(self, path: str) -> Response:
        presence = await run_in_threadpool(self.store.delete, path)
        if presence is Presence.NOT_FOUND:
            return r.not_found()
        if presence is Presence.GONE:
            return r.gone()
        self.wakeups.notify(path)
        return Response(status_code=204)

    # ------------------------------------------------------------------ GET

    async def read(self, request: Request, path: str) -> Response:
        read = _parse_read(request)
        info = await run_in_threadpool(self.store.get, path)
        if info is None:
            return r.not_found()
        if info.soft_deleted:
            return r.gone()
        position = read.start.resolve(info.tail)
        if position > info.tail:
            raise bad_request("offset is past the end of the stream")
        await run_in_threadpool(self.store.renew, info)
        self.telemetry.count(Metric.READS)

        if read.live == "sse":
            return await self._sse(path, info, position, read)
        if read.live == "long-poll":
            return await self._long_poll(path, info, position, read)
        if read.start.kind is StartKind.NOW:
            return self._tail_response(info, status=200)
        return await self._data_response(info, position, read, live=False)

    async def _long_poll(
        self, path: str, info: StreamInfo, position: int, read: ReadRequest
    ) -> Response:
        latest: StreamInfo | None = info
        if info.tail <= position and not info.closed:
            self.telemetry.count(Metric.LONG_POLL_WAITS)
            latest = await self.watcher.wait_for_change(
                path, position, self.settings.long_poll_timeout
            )
            if latest is not None and (latest.tail > position or latest.closed):
                self.telemetry.count(Metric.LONG_POLL_WAKES)
            if latest is None:
                return r.not_found()
            if latest.soft_deleted:
                return r.gone()
        if latest.tail > position:
            return await self._data_response(latest, position, read, live=True)
        return self._tail_response(latest, status=204, cursor=self._cursor(latest, read))

    async def _sse(self, path: str, info: StreamInfo, position: int, read: ReadRequest) -> Response:
        window = self.settings.sse_mode == "window"
        lifetime = (
            (self.settings.sse_window or self.settings.long_poll_timeout)
            if window
            else self.settings.sse_lifetime
        )
        plan = SsePlan(path, position, lifetime, stop_after_data=window, client_cursor=read.cursor)
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        if uses_base64(info.content_type):
            headers[r.STREAM_SSE_DATA_ENCODING] = "base64"
        events = self.sse.events(info, plan)
        if window:
            body = b"".join([event async for event in events])
            return Response(body, status_code=200, headers=headers)
        return StreamingResponse(events, status_code=200, headers=headers)

    async def _data_response(
        self, info: StreamInfo, position: int, read: ReadRequest, live: bool
    ) -> Response:
        batch = await run_in_threadpool(
            self.store.read, info, position, self.settings.max_read_bytes
        )
        up_to_date = batch.end >= info.tail
        closed = info.closed and up_to_date
        headers = {"Content-Type": info.content_type, **r.offset_headers(batch.end, closed)}
        if up_to_date:
            headers[r.STREAM_UP_TO_DATE] = "true"
        if live and not closed:
            headers[r.STREAM_CURSOR] = self._cursor(info, read)
        tag = caching.etag(info.incarnation, position, batch.end, closed)
        headers["ETag"] = tag
        headers["Cache-Control"] = self._cache_control(
            info, empty_open_tail=(batch.end == position and not closed)
        )
        if caching.etag_matches(read.if_none_match, tag):
            headers.pop("Content-Type")
            return Response(status_code=304, headers=headers)
        body = join_messages(list(batch.messages)) if batch.messages is not None else batch.data
        return Response(body, status_code=200, headers=headers)

    def _tail_response(self, info: StreamInfo, status: int, cursor: str | None = None) -> Response:
        """Nothing to return: the client is at the tail (offset=now, or a long-poll)."""
        headers = {
            **r.stream_headers(info),
            r.STREAM_UP_TO_DATE: "true",
            "Cache-Control": caching.NO_STORE,
        }
        if not info.closed and cursor is not None:
            headers[r.STREAM_CURSOR] = cursor
        if status == 204:
            return Response(status_code=204, headers=headers)
        body = b"[]" if is_json(info.content_type) else b""
        return Response(body, status_code=status, headers=headers)

    def _cursor(self, info: StreamInfo, read: ReadRequest) -> str:
        return self._cursor_for(info, read.cursor)

    @staticmethod
    def _cursor_for(info: StreamInfo, client_cursor: str | None) -> str:
        return next_cursor(time.time(), client_cursor, f"{info.incarnation}:{info.tail}")

    def _cache_control(self, info: StreamInfo, empty_open_tail: bool) -> str:
        if empty_open_tail:
            # Data may arrive at any moment; an empty tail answer must not be served later.
            return caching.NO_STORE
        expiry = info.expiry_time()
        return caching.read_cache_control(
            self.settings.cache_visibility,
            self.settings.cache_max_age,
            self.settings.stale_while_revalidate,
            None if expiry is None else expiry - time.time(),
        )

    # ------------------------------------------------------------------ helpers

    async def _body(self, request: Request) -> bytes:
        """The request body, refused with 413 as soon as it passes the append limit."""
        limit = self.settings.max_append_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ProtocolError(413, f"request body is larger than {limit} bytes")
        received = bytearray()
        async for piece in request.stream():
            received.extend(piece)
            if len(received) > limit:
                raise ProtocolError(413, f"request body is larger than {limit} bytes")
        return bytes(received)


_CREATE_REJECTIONS = {
    CreateStatus.CONFLICT: (
        409,
        "stream_exists",
        "a stream with a different configuration exists at this path",
    ),
    CreateStatus.SOURCE_NOT_FOUND: (404, "source_not_found", "the fork source does not exist"),
    CreateStatus.SOURCE_GONE: (409, "source_deleted", "the fork source has been deleted"),
    CreateStatus.CONTENT_TYPE_MISMATCH: (
        409,
        "content_type_mismatch",
        "a fork's content type must be its source's",
    ),
    CreateStatus.OFFSET_BEYOND_TAIL: (
        400,
        "fork_offset_beyond_tail",
        "Stream-Fork-Offset is past the source's tail",
    ),
    CreateStatus.SUB_OFFSET_OVERSHOOT: (
        400,
        "fork_sub_offset_overshoot",
        "Stream-Fork-Sub-Offset is past the source's data",
    ),
}


def validate_path(path: str) -> str:
    if not path or len(path) > _MAX_PATH_LENGTH:
        raise bad_request("stream path must be 1 to 1024 characters")
    if any(ord(c) < 0x20 or c == "\x7f" for c in path):
        raise bad_request("stream path must not contain control characters")
    if any(part in {".", ".."} for part in path.split("/")):
        raise bad_request("stream path must not contain '.' or '..' segments")
    return path


def _parse_read(request: Request) -> ReadRequest:
    query = request.query_params
    live_values = query.getlist("live")
    live = live_values[0] if live_values else None
    if len(live_values) > 1 or live not in {None, "long-poll", "sse"}:
        raise bad_request("live must be long-poll or sse")
    offsets = query.getlist("offset")
    if live is not None and not offsets:
        raise bad_request("live reads need an offset")
    return ReadRequest(
        start=parse_read_start(offsets),
        live=live,
        cursor=query.get("cursor"),
        if_none_match=request.headers.get("if-none-match"),
    )


def _payload(body: bytes, content_type: str | None, *, allow_empty_array: bool) -> Payload:
    if not body:
        return Payload()
    if content_type is not None and is_json(content_type):
        messages = split_messages(body, allow_empty_array=allow_empty_array)
        return Payload(b"".join(messages), tuple(len(m) for m in messages))
    return Payload(body)


def _bodyless(response: Response) -> Response:
    """HEAD answers carry the status and headers of the GET, never a body."""
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return Response(status_code=response.status_code, headers=headers)
