"""The stream endpoints: each reads as parse -> validate -> execute -> respond.

Parsing and validation are `core.http.requests` (pure; the body is read here, within the append
limit); executing is the store's; responding is `core.http.responses`. Everything a response
needs from the request (including its Location) is parsed and checked before the store is
called, so a request is refused whole or executed whole: building the answer to a write that
has been committed cannot fail.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Protocol
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive

from ..auth.decision import OPEN, Allowed
from ..config import StreamSettings
from ..protocol import caching
from ..protocol.append import Verdict
from ..protocol.caching import ReadMode, ReadShape
from ..protocol.cursor import next_cursor
from ..protocol.errors import ProtocolError, bad_request
from ..protocol.headers import (
    STREAM_CURSOR,
    STREAM_SSE_DATA_ENCODING,
    STREAM_UP_TO_DATE,
    is_json,
)
from ..protocol.limits import append_too_large
from ..protocol.offsets import StartKind, format_offset
from ..protocol.retention import Cut, RetentionPolicy, cache_seconds_left, policy_for
from ..protocol.sse import uses_base64
from ..storage import (
    CreateSpec,
    CreateStatus,
    Presence,
    ReadBatch,
    Snapshot,
    StoreUnavailable,
    StreamInfo,
    StreamStore,
    bounded_read_budget,
)
from ..telemetry import Metric, NoTelemetry, Telemetry
from . import responses as r
from .bodies import read_within
from .disconnect import CLIENT_GONE, unless_client_leaves
from .envelope import SSE_CONTROL_ALLOWANCE, fit_read
from .live import SharedReads, TailWatcher, next_tick
from .offload import offload, run_here
from .requests import (
    ReadRequest,
    fork_source,
    parse_append,
    parse_create,
    parse_read,
    public_host,
)
from .retained import StartFrom, asked_offset, retained_start
from .sse import SsePlan, SseSessions
from .wakeups import Wakeups

logger = logging.getLogger("dsaws")


# A read at an offset whose range is still pending waits this long at most: beyond the bound
# after which a dead writer's range is voided (`core.storage._ranges`).
PENDING_WAIT_SECONDS = 3.0
# How soon such a read first looks again (`StreamEndpoints._until_readable`).
PENDING_FIRST_LOOK_SECONDS = 0.01


class ChangeListener(Protocol):
    """Who is told of committed writes (the subscriptions)."""

    def unconcerned(self, path: str) -> bool:
        """True when nothing need be done for `path`, decided without I/O."""
        ...

    def changed(self, path: str) -> None:
        """The full notice: may read the store and queue work (blocking)."""
        ...


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
        settings: StreamSettings,
        store: StreamStore,
        wakeups: Wakeups,
        telemetry: Telemetry | None = None,
        store_in_process: bool = False,
    ) -> None:
        self.settings = settings
        self.limits = settings.limits
        self.live = settings.live
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
        self.watcher = TailWatcher(store, wakeups, self.live.poll_interval)
        self.reads = SharedReads(store)
        # What a response may carry besides the SSE control events around its data.
        self.response_budget = self.limits.max_response_bytes - SSE_CONTROL_ALLOWANCE
        self.sse = SseSessions(
            self.reads,
            self.watcher,
            self.limits.max_read_bytes,
            self.response_budget,
            self._cursor_for,
        )
        self.long_polls_waiting = 0  # long-polls now waiting at a tail, for tests to see

    # ------------------------------------------------------------------ PUT

    async def create(self, request: Request, path: str) -> Response:
        parsed = parse_create(request.headers, self.settings.base_path)
        spec = parsed.with_body(await self._body(request), self.response_budget)
        spec = replace(spec, retention=self._retention_for(path, spec))
        location = self._location(request, path)

        outcome = await self.call_store(self.store.create, path, spec)
        # Shared checks begun before the create must no longer answer readers of the path.
        self.wakeups.notify(path)
        if outcome.status is CreateStatus.CREATED and spec.payload.data:
            await self._changed(path)

        return r.create_response(outcome, location)

    def _retention_for(self, path: str, spec: CreateSpec) -> RetentionPolicy | None:
        """The policy a create asked for, else its prefix's default (compaction only for a
        JSON stream: a default never makes a create of another type fail)."""
        policy = policy_for(path, spec.retention, self.settings.retention_defaults)
        defaulted = policy is not None and policy.compact and spec.retention is None
        if defaulted and spec.content_type is not None and not is_json(spec.content_type):
            return None
        return policy

    def fork_source(self, request: Request) -> str | None:
        """The path of the stream a create forks from (None: not a fork); 400 when the
        header names no stream of this server."""
        return fork_source(request.headers, self.settings.base_path)

    def stream_url(self, request: Request, path: str) -> str:
        return self._location(request, path)

    def _location(self, request: Request, path: str) -> str:
        """The new stream's URL: percent-encoded, on the host the client named (the CDN's, when
        the request came through one: it passes the viewer's Host as X-Forwarded-Host)."""
        host = public_host(request.headers, request.scope.get("server"))
        scheme = request.scope.get("scheme")
        scheme = scheme if scheme in {"http", "https"} else "https"
        return f"{scheme}://{host}{self.settings.base_path}/{quote(path)}"

    # ------------------------------------------------------------------ POST

    async def append(self, request: Request, path: str) -> Response:
        parsed = parse_append(request.headers)
        intent, payload = parsed.with_body(await self._body(request), self.response_budget)

        if intent.producer is not None:
            # It may wait for its predecessors: on the event loop, holding no thread of the
            # store's pool; its store calls on that pool (a group commit's follower waits for
            # its leader there).
            outcome = await self.store.append_async(path, intent, payload, offload)
        else:
            outcome = await self.call_store(self.store.append, path, intent, payload)

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
        elif outcome.decision is not None and outcome.decision.verdict is Verdict.DUPLICATE:
            self.telemetry.count(Metric.APPENDS_DEDUPLICATED)
            self.telemetry.count(Metric.BYTES_DEDUPLICATED, len(payload))
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
        read = replace(parse_read(request.query_params, request.headers), access=access)
        info = await self._snapshot(path, read)
        if info is None:
            return r.not_found()
        if info.soft_deleted:
            return r.gone()
        now = time.time()
        read = replace(read, decided_at=now)
        retained = info.retained_now(now)
        decided = retained_start(retained, read.start)
        if decided.kind is StartFrom.GONE:
            return r.offset_gone(asked_offset(read.start), retained)
        if read.until is not None and read.until < retained.start:
            # A bounded read of a range retention dropped (from the beginning included).
            return r.offset_gone(format_offset(read.until), retained)
        if decided.kind is StartFrom.SNAPSHOT:
            assert retained.snapshot is not None
            return await self._snapshot_read(path, info, retained.snapshot, read)
        position = read.start.resolve(info.tail) if decided.position is None else decided.position
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

    async def _snapshot_read(
        self, path: str, info: StreamInfo, snapshot: Snapshot, read: ReadRequest
    ) -> Response:
        """A compacted stream read from its snapshot (from the beginning, or at its token):
        the snapshot and, in the same response, as much of the data after it as fits, so
        that a client that makes one request gets the whole state (in every mode: a live
        read has data to send at once)."""
        if info.ttl_seconds is not None:
            await self.call_store(self.store.renew, info)
        self.telemetry.count(Metric.READS)
        messages = await self.call_store(self.store.snapshot_messages, snapshot)
        if read.live == "sse":
            return await self._sse(path, info, snapshot.at, read, prefix=messages)
        room = self._read_size(0, read) - sum(len(message) + 1 for message in messages) - 1
        bound = info.tail if read.until is None else min(read.until, info.tail)
        end, rest = snapshot.at, ()
        if room > 0 and snapshot.at < bound:
            # JSON bytes count their separators too: bound only what `until` asks for.
            span = bound - snapshot.at
            most = room if read.until is None else min(room, bounded_read_budget(span, True))
            bounded = info.ending_at(bound)
            after = await self.call_store(self.store.read, bounded, snapshot.at, most)
            after = after.before(bound)
            end, rest = after.end, after.messages or ()
        batch = ReadBatch(snapshot.at, end, messages=messages + rest)
        return self._batch_response(info, batch, read, snapshot=snapshot)

    async def _until_readable(self, path: str, position: int) -> StreamInfo | None:
        """The stream once its readable data reaches `position`, which ranges still pending
        hold back; `StoreUnavailable` if that takes longer than a dead writer's range takes
        to be voided. It looks again on a grid of instants shared by every reader waiting at
        the stream in this process, so that they share each look (one consistent read, plus
        a Query while ranges are pending): 10 ms apart at first (the range is usually being
        filled at that moment), then twice as far each time, up to the live poll interval."""
        deadline = time.monotonic() + PENDING_WAIT_SECONDS
        interval = PENDING_FIRST_LOOK_SECONDS
        while True:
            tick = next_tick(time.monotonic(), interval)
            await asyncio.sleep(tick - time.monotonic())
            interval = min(interval * 2, self.live.poll_interval)
            info = await self.watcher.checks.get(path, not_before=tick)
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
                    self.watcher.wait_for_change(path, position, self.live.long_poll_timeout),
                )
            finally:
                self.long_polls_waiting -= 1
            if waited is CLIENT_GONE:
                self.telemetry.count(Metric.LONG_POLLS_ABANDONED)
                return r.client_gone()
            latest = waited
            if latest is not None and (latest.tail > position or latest.closed):
                self.telemetry.count(Metric.LONG_POLL_WAKES)
            elif latest is not None and not latest.soft_deleted:
                self.telemetry.count(Metric.LONG_POLL_TIMEOUTS)
            if latest is None:
                return r.not_found()
            if latest.soft_deleted:
                return r.gone()
        if latest.tail > position:
            return await self._data_response(latest, position, read, shared=True)
        return self._tail_response(latest, read, status=204)

    async def _sse(
        self,
        path: str,
        info: StreamInfo,
        position: int,
        read: ReadRequest,
        prefix: tuple[bytes, ...] = (),
    ) -> Response:
        window = self.live.sse_window
        lifetime = self.live.sse_seconds
        plan = SsePlan(
            path,
            position,
            lifetime,
            stop_after_data=window,
            client_cursor=read.cursor,
            whole=read.start.whole,
            prefix=prefix,
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
            # Room for a JSON body's separators, or a range read whole would need a second
            # request; the read stops at `bound` rather than spend that room past it. (A byte
            # read's budget is the range itself: it never passes `bound`, and where `bound`
            # lies inside an append its end is named as such, not as an append's end.)
            json_mode = is_json(info.content_type)
            most = min(most, bounded_read_budget(bound - position, json_mode))
            bounded = info.ending_at(bound) if json_mode else info
            batch = await self.call_store(self.store.read, bounded, position, most, whole)
            batch = batch.before(bound)
            if batch.end == batch.start:
                raise bad_request("until is not at a message boundary")
        else:
            empty = () if is_json(info.content_type) else None
            # Nothing to return: the offset handed back is the one asked at, exact or not.
            exact = read.start.kind is StartKind.POSITION and not whole
            batch = ReadBatch(position, position, messages=empty, exact_empty=exact)
        return self._batch_response(info, batch, read)

    def _batch_response(
        self,
        info: StreamInfo,
        batch: ReadBatch,
        read: ReadRequest,
        snapshot: Snapshot | None = None,
    ) -> Response:
        """The response serving `batch`; after a compacted stream's `snapshot`, whose
        messages it begins with (served whole: the compaction made sure they fit)."""
        render = r.read_body_lines if read.json_lines else r.read_body
        fitted, body = fit_read(
            batch,
            render,
            info.content_type,
            self.limits.max_response_bytes,
            text=not uses_base64(info.content_type),
        )
        if snapshot is not None and len(fitted.messages or ()) < snapshot.count:
            fitted = batch.head(snapshot.count)
            body = render(fitted)
        batch = fitted
        up_to_date = batch.end >= info.tail
        closed = info.closed and up_to_date
        headers = {
            "Content-Type": info.content_type,
            **r.offset_headers(batch.end, closed, batch.inside),
            **r.retention_headers(info),
        }
        if up_to_date:
            headers[STREAM_UP_TO_DATE] = "true"
        if read.live is not None and not closed:
            headers[STREAM_CURSOR] = self._cursor(batch.end, read)
        tag = caching.etag(info.incarnation, batch.start, batch.end, closed, snapshot is not None)
        headers["ETag"] = tag
        has_data = batch.end > batch.start or snapshot is not None
        shape = ReadShape(_read_mode(read), has_data, up_to_date, closed, read.from_now)
        # What a cut announced will drop is kept by caches only until the cut takes effect:
        # a snapshot's response included, which a later compaction replaces.
        begins = batch.start - 1 if snapshot is not None else batch.start
        headers["Cache-Control"] = self._cache_control(
            info, shape, read.access, begins, read.decided_at
        )
        if caching.etag_matches(read.if_none_match, tag):
            headers.pop("Content-Type")
            return Response(status_code=304, headers=headers)
        return Response(body, status_code=200, headers=headers)

    def _read_size(self, position: int, read: ReadRequest) -> int:
        """How much a response may carry. A bounded catch-up read (`until`, a bulk reader's)
        takes `max_bounded_read_bytes` from wherever it starts (at most three quarters of the
        front door's limit), so a range is read in pieces its reader can work on while the
        next one comes. An unbounded catch-up read from the stream's start may fill a whole
        response (the front door's limit: one request reads a whole stream up to that size,
        as clients that make exactly one request need); every other read, and every live
        one, takes `max_read_bytes`, so catching up on a long stream through a CDN fetches
        the same bytes from the origin as before (docs/protocol.md, "Reads")."""
        limits = self.limits
        if read.until is not None:
            # Three quarters of what the front door carries: the room base64 (binary inside
            # Lambda) and the escaping of JSON's quotes take, so a piece is not read only to be
            # cut (`fit_read`) and read again.
            front_door = limits.max_response_bytes * 3 // 4
            return max(limits.max_read_bytes, min(limits.max_bounded_read_bytes, front_door))
        if (position == 0 or read.start.kind is StartKind.BEGINNING) and read.live is None:
            return max(
                limits.max_read_bytes,
                limits.max_read_from_start_bytes or limits.max_response_bytes,
            )
        return limits.max_read_bytes

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

    def _cache_control(
        self,
        info: StreamInfo,
        shape: ReadShape,
        access: Allowed,
        begins: int | None = None,
        decided_at: float | None = None,
    ) -> str:
        """Shared caches keep what anyone may read; a token's reads are the bearer's alone,
        and a signed URL's reads are kept no longer than the URL is valid. A response that
        `begins` below a cut that had not taken effect when the read was `decided_at` is kept
        no longer than until it does (not at all, if it has meanwhile)."""
        rules = self.settings.cache_rules
        if access.private:
            rules = replace(rules, visibility="private")
        now = time.time()
        ends = [t for t in (info.expiry_time(), access.valid_until) if t is not None]
        if begins is not None and info.pending_cut is not None:
            cut = Cut(info.pending_cut.retained.start, info.pending_cut.effective_at)
            left = cache_seconds_left(cut, begins, decided_at or now, now)
            if left is not None:
                ends.append(now + left)
        seconds_left = min(ends) - now if ends else None
        return caching.read_cache_control(rules, shape, seconds_left)

    # ------------------------------------------------------------------ helpers

    async def _body(self, request: Request) -> bytes:
        """The request body, refused with 413 as soon as it passes the append limit."""
        limit = self.limits.max_append_bytes
        body = await read_within(request, limit)
        if body is None:
            raise ProtocolError(413, append_too_large(limit))
        return body
