"""The stream store on DynamoDB (metadata, coordination, small chunks) and S3 (large chunks).

Every state change is one conditional write (a TransactWriteItems when it touches more than
one item); a lost race re-reads and decides again. Nothing here depends on process memory.

Appends (`core.storage._append`) commit at one of two points. A direct commit is one
transaction conditioned on the exact state it decided on. A reserved range commits when its
fill transaction succeeds: its chunk, its claim and its producer state together; its offset was
fixed by the reservation before, and it becomes readable once every range below it is filled or
void (`core.storage._settle`). Either way, what is acknowledged was committed, exactly once,
and readers never return bytes of a range that is not.

Binding rule: whatever is written on behalf of one incarnation of a path (an S3 body and its
message index, a chunk item, a producer item) is committed only as part of that incarnation,
because the collector removes an incarnation's objects and items together, and treats objects
no chunk of their own incarnation names as orphans. So:
  - every commit is conditioned on the stream item still holding the incarnation it targets;
  - a body is stored for one incarnation (`StoredBody.incarnation`), `ChunkStore.chunk_put`
    refuses it for any other, and a retry that finds the path holding another incarnation
    stores its body again (the first upload becomes an orphan);
  - a create keeps one new incarnation id across its attempts, so the body it uploaded is
    still its own when a lost race makes it try again;
  - producer items carry the incarnation they belong to and are ignored by any other.
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ..protocol.append import AppendIntent
from ..protocol.producer import ProducerState
from ..protocol.ttl import renewal_due, renewal_window
from ..telemetry import Metric, NoTelemetry, Telemetry
from . import _items as items
from . import _requests as requests
from ._append import Appender
from ._chunks import (
    DEFAULT_CHUNK_CACHE_BYTES,
    DEFAULT_INLINE_MAX_BYTES,
    ChunkStore,
    StoredBody,
)
from ._fork import new_stream_settings, resolve_fork
from ._group import GroupCommits
from ._ranges import DEFAULT_VOID_AFTER_SECONDS, PUBLISH_EVERY, QUIET_SECONDS
from ._recent import RecentWrites
from ._seal_plan import DEFAULT_HOT_BYTES, marks
from ._settle import Settler
from .aws import Conflict, call, is_throttle_code, pages, request_token, when_made
from .base import Runner
from .model import (
    AppendOutcome,
    CreateOutcome,
    CreateSpec,
    CreateStatus,
    InvalidCursor,
    Payload,
    Presence,
    ReadBatch,
    Retained,
    Snapshot,
    StoreUnavailable,
    StreamInfo,
    StreamPage,
)


class DynamoStore:
    def __init__(
        self,
        dynamodb: Any,
        s3: Any,
        table: str,
        bucket: str,
        *,
        inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
        chunk_cache_bytes: int = DEFAULT_CHUNK_CACHE_BYTES,
        renew_fraction: float = 0.1,
        write_deadline: float = 10.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        telemetry: Telemetry | None = None,
        read_only: bool = False,
        seal_mark_bytes: int = DEFAULT_HOT_BYTES,
        void_after: float = DEFAULT_VOID_AFTER_SECONDS,
    ) -> None:
        # A read-only store (bulk jobs, whose role may only read) sees expired streams as
        # clients do, but leaves reaping them to the server and the collector.
        self.read_only = read_only
        # Commits mark a stream for the sealer each time its tail passes a multiple of this
        # (and when it closes); see `core.storage.sealer`.
        self.seal_mark_bytes = seal_mark_bytes
        self.dynamodb = dynamodb
        self.s3 = s3
        self.table = table
        self.bucket = bucket
        self.chunks = ChunkStore(
            dynamodb, s3, table, bucket, inline_max_bytes, cache_bytes=chunk_cache_bytes
        )
        self.renew_fraction = renew_fraction
        self.write_deadline = write_deadline
        self.clock = clock
        self.sleep = sleep
        # Shared with the append path (`core.storage._append`): turns of this process's
        # writers of a stream, what this process last committed, settling pending ranges.
        self.turns = GroupCommits()
        self.recent = RecentWrites()
        self.settler = Settler(dynamodb, table, clock, void_after)
        self.appender = Appender(self)
        self.telemetry: Telemetry = telemetry or NoTelemetry()
        for client in (dynamodb, s3):
            when_made(
                client, lambda made: made.meta.events.register("needs-retry", self._note_throttle)
            )

    # ---------------------------------------------------------------- reads of metadata

    def get(self, path: str) -> StreamInfo | None:
        """The stream as readers see it: `tail` where its readable data ends (ranges pending
        above the published tail settled, `core.storage._settle`)."""
        info = self.live(self._get_raw(path))
        if info is None or info.settled:
            return info
        lagging = info.ranges - info.published_ranges >= PUBLISH_EVERY
        quiet = self.clock() - info.reserved_at >= QUIET_SECONDS
        return self.settler.settle(info, publish=lagging or quiet, write=not self.read_only)

    def settle(self, info: StreamInfo) -> StreamInfo:
        """`info` with `tail` where its readable data ends (see `get`)."""
        return self.settler.settle(info, write=not self.read_only)

    def live(self, info: StreamInfo | None) -> StreamInfo | None:
        """The stream as clients see it: an expired one is reaped on sight (soft-deleted if
        forks still read it), and so is a soft-deleted one whose last fork is gone."""
        if info is None or not self.lifecycle_due(info):
            return info
        if not self.read_only:
            with contextlib.suppress(StoreUnavailable):
                self.finish_lifecycle(info)
        return replace(info, soft_deleted=True) if info.ref_count > 0 else None

    def list_streams(self, prefix: str, cursor: str | None, page_items: int) -> StreamPage:
        """The live streams whose paths start with `prefix`, one scan page at a time (a scan
        page reads at most `page_items` items of any kind, so a page may hold no stream yet
        still have a cursor). InvalidCursor for a cursor this store did not mint."""
        start = None
        if cursor is not None:
            start = items.decode_page_cursor(cursor)
            if start is None:
                raise InvalidCursor(cursor)
        request = requests.list_page(self.table, prefix, page_items, start)
        response = call(self.dynamodb.scan, **request)
        listed = []
        for item in response.get("Items", []):
            path = item["pk"]["S"].removeprefix(items.STREAM_PREFIX)
            info = self.live(items.decode_stream(path, item))
            if info is not None and not info.soft_deleted:
                listed.append(info)
        listed.sort(key=lambda info: info.path)
        last = response.get("LastEvaluatedKey")
        cursor = items.encode_page_cursor(last) if last else None
        return StreamPage(tuple(info.path for info in listed), cursor, tuple(listed))

    def producers(self, info: StreamInfo) -> list[tuple[str, ProducerState]]:
        """The producers that wrote to this incarnation of the stream, by id (the console's
        operator view; a Query of the stream's partition)."""
        request = requests.producers_of(self.table, info.path)
        found = []
        for page in pages(self.dynamodb.query, request):
            for item in page:
                state = items.decode_producer(item, info.incarnation)
                if state is not None:
                    found.append((item["sk"]["S"].removeprefix(items.PRODUCER_SORT_PREFIX), state))
        return found

    def forks_of(self, path: str, progress: Callable[[int], None] | None = None) -> list[str]:
        """The live streams forked from `path` (a Scan of the whole table: for an operator's
        occasional look, cached by the caller; `progress` is told the pages read so far, and
        may stop the scan by raising)."""
        forks = []
        scan = pages(self.dynamodb.scan, requests.forks_of(self.table, path))
        for number, page in enumerate(scan, 1):
            if progress is not None:
                progress(number)
            for item in page:
                fork = item["pk"]["S"].removeprefix(items.STREAM_PREFIX)
                info = self.live(items.decode_stream(fork, item))
                if info is not None and not info.soft_deleted:
                    forks.append(fork)
        return sorted(forks)

    def snapshot(self, path: str) -> StreamInfo | None:
        """The stream item as stored: expired and soft-deleted streams included, nothing
        reaped (for the sealer and other maintenance)."""
        return self._get_raw(path)

    def _get_raw(self, path: str) -> StreamInfo | None:
        response = call(self.dynamodb.get_item, **requests.get_stream(self.table, path))
        item = response.get("Item")
        return items.decode_stream(path, item) if item else None

    def get_for_write(
        self, path: str, producer_id: str | None
    ) -> tuple[StreamInfo | None, dict[str, Any] | None] | None:
        """The stream item and, in the same consistent read, one producer item; None when the
        read was throttled (unprocessed keys, which botocore does not retry for us)."""
        if producer_id is None:
            return self._get_raw(path), None
        request = requests.get_stream_and_producers(self.table, path, [producer_id])
        response = call(self.dynamodb.batch_get_item, **request)
        if response.get("UnprocessedKeys"):
            return None
        found = {
            item["sk"]["S"]: item for item in response.get("Responses", {}).get(self.table, [])
        }
        meta = found.get(items.META)
        info = items.decode_stream(path, meta) if meta else None
        return info, found.get(f"p#{producer_id}")

    def get_for_write_many(
        self, path: str, producer_ids: list[str]
    ) -> tuple[StreamInfo | None, dict[str, dict[str, Any]]] | None:
        """The stream item and these producers' items, in one consistent read (a group
        commit's); None when the read was throttled."""
        request = requests.get_stream_and_producers(self.table, path, producer_ids)
        response = call(self.dynamodb.batch_get_item, **request)
        if response.get("UnprocessedKeys"):
            return None
        found = {
            item["sk"]["S"]: item for item in response.get("Responses", {}).get(self.table, [])
        }
        meta = found.pop(items.META, None)
        producers = {sk.removeprefix("p#"): item for sk, item in found.items()}
        return (items.decode_stream(path, meta) if meta else None), producers

    # ---------------------------------------------------------------- create

    def create(self, path: str, spec: CreateSpec) -> CreateOutcome:
        body: StoredBody | None = None
        # One incarnation for every attempt: a body uploaded by one attempt is still this
        # incarnation's when a lost race makes the next attempt commit it.
        incarnation = _new_incarnation(self.clock())
        for _ in self._attempts():
            now = self.clock()
            existing = self._get_raw(path)
            if existing is not None and self.lifecycle_due(existing):
                # Finish the old stream on its own (it may release the very source this
                # create forks), then look again.
                self.finish_lifecycle(existing)
                continue
            source: StreamInfo | None = None
            position = 0
            if spec.fork is not None:
                resolved = resolve_fork(self, spec, spec.fork)
                if isinstance(resolved, CreateOutcome):
                    if existing is None:
                        return resolved
                else:
                    source, position = resolved
            info = self._new_stream(path, spec, now, source, position, incarnation)
            if existing is not None and existing.incarnation == incarnation:
                # Our own commit, whose answer was lost (a timeout that botocore retried into
                # a conflict with itself): this call created the stream.
                return CreateOutcome(CreateStatus.CREATED, existing)
            if existing is not None:
                return CreateOutcome(self._compare(existing, info), existing)
            body = self.chunks.body_for(info.incarnation, spec.payload, body)
            try:
                self._commit_create(info, spec.payload, body, source)
            except Conflict:
                continue
            self.recent.remember(info, None, None)
            return CreateOutcome(CreateStatus.CREATED, info)
        raise StoreUnavailable("create kept losing races")

    @staticmethod
    def _compare(existing: StreamInfo, wanted: StreamInfo) -> CreateStatus:
        if existing.soft_deleted or not existing.config.matches(wanted.config):
            return CreateStatus.CONFLICT
        return CreateStatus.EXISTS

    def _new_stream(
        self,
        path: str,
        spec: CreateSpec,
        now: float,
        source: StreamInfo | None,
        position: int,
        incarnation: str,
    ) -> StreamInfo:
        content_type, ttl, expires_at = new_stream_settings(spec, source)
        return StreamInfo(
            path=path,
            incarnation=incarnation,
            content_type=content_type,
            tail=position + len(spec.payload),
            closed=spec.closed,
            closed_by=None,
            last_stream_seq=None,
            ttl_seconds=ttl,
            expires_at=expires_at,
            last_access=now,
            created_at=now,
            forked_from=source.path if source else None,
            source_incarnation=source.incarnation if source else None,
            fork_position=position,
            inherited=source.segments_until(position) if source else (),
            retention=spec.retention.header() if spec.retention is not None else None,
            # A fork reads its source's history as retention left it (and its snapshot).
            retained=source.retained_now(now) if source else Retained(),
            renew_window=renewal_window(ttl, self.renew_fraction) if ttl is not None else 0.0,
            ranges=1 if len(spec.payload) else 0,
            published_ranges=1 if len(spec.payload) else 0,
            reserved_at=now,
        )

    def _commit_create(
        self,
        info: StreamInfo,
        payload: Payload,
        body: StoredBody | None,
        source: StreamInfo | None,
    ) -> None:
        actions = [requests.create_stream(self.table, info)]
        if body is not None:
            start = info.fork_position
            put = self.chunks.chunk_put(info.incarnation, start, payload, body, number=info.ranges)
            actions.append({"Put": put})
        if source is not None:
            position, now = info.fork_position, self.clock()
            actions.append(requests.reference_source(self.table, source, position, now))
        if body is not None and marks(
            info.fork_position, info.tail, info.closed, self.seal_mark_bytes
        ):
            actions.append(items.seal_mark_put(self.table, info, info.tail, self.clock()))
        if info.retention is not None:
            actions.append(items.retention_entry_put(self.table, info))
        self.write(actions)

    # ---------------------------------------------------------------- append

    def append(self, path: str, intent: AppendIntent, payload: Payload) -> AppendOutcome:
        """See `core.storage._append`: direct commits for streams one writer appends to,
        reserved ranges for streams several do."""
        return self.appender.append(path, intent, payload)

    async def append_async(
        self, path: str, intent: AppendIntent, payload: Payload, run: Runner
    ) -> AppendOutcome:
        """The same append for a caller on an event loop: a producer request's waits (its
        turn, its predecessor) are made there, and the store's calls through `run`."""
        return await self.appender.append_async(path, intent, payload, run)

    # ---------------------------------------------------------------- data

    def read(self, info: StreamInfo, start: int, max_bytes: int, whole: bool = False) -> ReadBatch:
        return self.chunks.read(info, start, max_bytes, whole)

    def snapshot_messages(self, snapshot: Snapshot) -> tuple[bytes, ...]:
        """The messages of a compacted stream's snapshot (`core.storage.retention`)."""
        return self.chunks.snapshot_messages(snapshot)

    def boundaries(self, info: StreamInfo, start: int, end: int) -> Iterator[int]:
        """Message boundaries strictly between `start` and `end` where a range of the stream
        may be split (not every one: those where stored chunks end)."""
        return self.chunks.boundaries(info, start, end)

    # ---------------------------------------------------------------- TTL

    def renew(self, info: StreamInfo) -> None:
        now = self.clock()
        dead = info.oldest_live_access(now)
        if dead is None or not renewal_due(info.last_access, info.renew_window, now):
            return
        # A failed condition means someone else renewed it, or it expired: nothing to do.
        with contextlib.suppress(Conflict):
            call(self.dynamodb.update_item, **requests.renew_access(self.table, info, now, dead))

    # ---------------------------------------------------------------- delete and lifecycle

    def delete(self, path: str) -> Presence:
        self.recent.forget(path)
        for _ in self._attempts():
            raw = self._get_raw(path)
            info = self.live(raw)
            if info is None:
                return Presence.NOT_FOUND
            if info.soft_deleted:
                return Presence.GONE
            try:
                if info.ref_count > 0:
                    self._soft_delete(info)
                else:
                    self._hard_delete(info)
            except Conflict:
                continue
            return Presence.FOUND
        raise StoreUnavailable("delete kept losing races")

    def lifecycle_due(self, info: StreamInfo) -> bool:
        """An expired stream not yet reaped, or a soft-deleted one whose last fork is gone
        (a cascade that was cut short)."""
        if info.soft_deleted:
            return info.ref_count == 0
        return info.is_expired(self.clock())

    def finish_lifecycle(self, info: StreamInfo) -> bool:
        """Reap an expired stream, or finish an interrupted cascade (for readers, creates and
        the collector alike). True when something was done."""
        if not self.lifecycle_due(info):
            return False
        try:
            self._reap(info)
        except Conflict:
            return False  # it changed under us: whoever looks next sees the new state
        return True

    def _reap(self, info: StreamInfo) -> None:
        """Gone if nothing forks it, else soft-deleted for its forks."""
        if info.ref_count > 0:
            self._soft_delete(info)
        else:
            self._hard_delete(info)

    def _soft_delete(self, info: StreamInfo) -> None:
        call(self.dynamodb.update_item, **requests.soft_delete(self.table, info))

    def _hard_delete(self, info: StreamInfo) -> None:
        """Remove an unreferenced stream, retire its data and release its source; then, if
        that source was soft-deleted and this was its last fork, remove it too (cascade)."""
        self.write([requests.delete_stream(self.table, info), *self._retire_actions(info)])
        self._cascade(info)

    def _cascade(self, released: StreamInfo) -> None:
        """Best effort: the collector finishes any cascade a crash interrupts."""
        if released.forked_from is None:
            return
        source = self._get_raw(released.forked_from)
        if (
            source is None
            or source.incarnation != released.source_incarnation
            or source.ref_count > 0
            or not (source.soft_deleted or source.is_expired(self.clock()))
        ):
            return
        with contextlib.suppress(Conflict):
            self._hard_delete(source)

    def _retire_actions(self, info: StreamInfo) -> list[dict[str, Any]]:
        """Mark the incarnation's data for the collector and release the fork's source."""
        actions = [requests.retire_incarnation(self.table, info, self.clock())]
        if info.forked_from is not None and info.source_incarnation is not None:
            source, incarnation = info.forked_from, info.source_incarnation
            actions.append(requests.release_source(self.table, source, incarnation))
        return actions

    # ---------------------------------------------------------------- plumbing

    def _note_throttle(self, response: Any = None, **_: Any) -> None:
        """botocore retries throttling itself; count each throttled attempt."""
        if response is not None and is_throttle_code(response[1].get("Error", {}).get("Code")):
            self.telemetry.count(Metric.AWS_THROTTLES)

    def _attempts(self) -> Iterator[int]:
        """Bounded retries for lost races, with a little backoff under heavy contention."""
        deadline = time.monotonic() + self.write_deadline
        attempt = 0
        while time.monotonic() < deadline:
            if attempt:
                self.telemetry.count(Metric.CONDITIONAL_WRITE_RETRIES)
            yield attempt
            attempt += 1
            if attempt > 3:  # jittered, so that writers that collided do not again
                self.sleep(random.uniform(0, min(0.05, 0.002 * attempt)))

    def write(self, actions: list[dict[str, Any]]) -> None:
        """One atomic commit. The request token makes botocore's own retries of a timed-out
        attempt idempotent, so a transport retry can never apply the same commit twice."""
        call(
            self.dynamodb.transact_write_items,
            TransactItems=actions,
            ClientRequestToken=request_token(),
        )
        self.chunks.committed(actions)


def _new_incarnation(now: float) -> str:
    # Time-ordered prefix for readable listings; the random part makes it unique.
    return f"{int(now * 1000):013x}{uuid.uuid4().hex[:16]}"
