"""The stream store on DynamoDB (metadata, coordination, small chunks) and S3 (large chunks).

Every state change is one conditional write (a TransactWriteItems when it touches more than
one item); a lost race re-reads and decides again. Nothing here depends on process memory.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..protocol.append import AppendIntent, WriteState, decide_append
from ..protocol.fork import inherit_expiry
from ..protocol.headers import DEFAULT_CONTENT_TYPE, is_json, media_type
from ..protocol.producer import ProducerState
from ..telemetry import Metric, NoTelemetry, Telemetry
from . import _items as items
from .aws import is_condition_failure, is_throttle_code, is_unavailable
from .model import (
    AppendOutcome,
    CreateOutcome,
    CreateSpec,
    CreateStatus,
    ForkRequest,
    Payload,
    Presence,
    ReadBatch,
    Segment,
    StoreUnavailable,
    StreamInfo,
)

# Well below DynamoDB's 400 KB item limit, leaving room for the message-length index.
DEFAULT_INLINE_MAX_BYTES = 64 * 1024
# Packed message lengths above this size go to S3 beside the chunk's bytes.
_INLINE_INDEX_MAX_BYTES = 64 * 1024
_QUERY_PAGE_ITEMS = 500


class _StripedLocks:
    """A fixed set of locks, one picked per stream path."""

    def __init__(self, stripes: int = 64) -> None:
        self._locks = [threading.Lock() for _ in range(stripes)]

    def lock_for(self, path: str) -> threading.Lock:
        return self._locks[zlib.crc32(path.encode()) % len(self._locks)]


class _Conflict(Exception):
    """A conditional write lost a race."""


@dataclass(frozen=True)
class _Chunk:
    start: int
    end: int
    inline: bytes | None
    s3_key: str | None
    lengths: tuple[int, ...] | None
    lengths_key: str | None


@dataclass(frozen=True)
class _StoredBody:
    """Where a payload lives once written: inline in the chunk item or in S3."""

    inline: bytes | None = None
    s3_key: str | None = None
    lengths: bytes | None = None
    lengths_key: str | None = None


class DynamoStore:
    def __init__(
        self,
        dynamodb: Any,
        s3: Any,
        table: str,
        bucket: str,
        *,
        inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
        renew_fraction: float = 0.1,
        write_deadline: float = 10.0,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.dynamodb = dynamodb
        self.s3 = s3
        self.table = table
        self.bucket = bucket
        self.inline_max_bytes = inline_max_bytes
        self.renew_fraction = renew_fraction
        self.write_deadline = write_deadline
        self.clock = clock
        self._stream_locks = _StripedLocks()
        self.telemetry: Telemetry = telemetry or NoTelemetry()
        for client in (dynamodb, s3):
            client.meta.events.register("needs-retry", self._note_throttle)

    # ---------------------------------------------------------------- reads of metadata

    def get(self, path: str) -> StreamInfo | None:
        return self._live(self._get_raw(path))

    def _live(self, info: StreamInfo | None) -> StreamInfo | None:
        """The stream as clients see it: an expired one is reaped on sight, and one that
        expired while forks still read it becomes soft-deleted."""
        if info is None or info.soft_deleted or not info.is_expired(self.clock()):
            return info
        with contextlib.suppress(_Conflict, StoreUnavailable):
            self._reap(info)
        return replace(info, soft_deleted=True) if info.ref_count > 0 else None

    def _get_raw(self, path: str) -> StreamInfo | None:
        response = self._call(
            self.dynamodb.get_item,
            TableName=self.table,
            Key=items.stream_key(path),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return items.decode_stream(path, item) if item else None

    def _get_for_write(
        self, path: str, producer_id: str | None
    ) -> tuple[StreamInfo | None, dict[str, Any] | None]:
        """The stream item and, in the same consistent read, one producer item."""
        if producer_id is None:
            return self._get_raw(path), None
        keys = [items.stream_key(path), items.producer_key(path, producer_id)]
        found: dict[str, Any] = {}
        request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            response = self._call(self.dynamodb.batch_get_item, RequestItems=request)
            for item in response.get("Responses", {}).get(self.table, []):
                found[item["sk"]["S"]] = item
            request = response.get("UnprocessedKeys") or {}
        meta = found.get(items.META)
        info = items.decode_stream(path, meta) if meta else None
        return info, found.get(f"p#{producer_id}")

    # ---------------------------------------------------------------- create

    def create(self, path: str, spec: CreateSpec) -> CreateOutcome:
        body: _StoredBody | None = None
        for _ in self._attempts():
            now = self.clock()
            raw = self._get_raw(path)
            existing = self._live(raw)
            source: StreamInfo | None = None
            position = 0
            if spec.fork is not None:
                resolved = self._resolve_fork(spec, spec.fork)
                if isinstance(resolved, CreateOutcome):
                    if existing is None:
                        return resolved
                else:
                    source, position = resolved
            info = self._new_stream(path, spec, now, source, position)
            if existing is not None:
                return CreateOutcome(self._compare(existing, info), existing)
            if body is None and len(spec.payload):
                body = self._store_body(info.incarnation, spec.payload)
            # An expired item that could not be reaped just now is replaced in the commit.
            replacing = raw if raw is not None and raw.is_expired(now) else None
            try:
                self._commit_create(info, spec.payload, body, replacing, source)
            except _Conflict:
                continue
            return CreateOutcome(CreateStatus.CREATED, info)
        raise StoreUnavailable("create kept losing races")

    @staticmethod
    def _compare(existing: StreamInfo, wanted: StreamInfo) -> CreateStatus:
        if existing.soft_deleted or not existing.config.matches(wanted.config):
            return CreateStatus.CONFLICT
        return CreateStatus.EXISTS

    def _resolve_fork(
        self, spec: CreateSpec, fork: ForkRequest
    ) -> CreateOutcome | tuple[StreamInfo, int]:
        """The live source and the position a fork of it diverges at, or why there is none."""
        source = self.get(fork.source_path)
        if source is None:
            return CreateOutcome(CreateStatus.SOURCE_NOT_FOUND)
        if source.soft_deleted:
            return CreateOutcome(CreateStatus.SOURCE_GONE, source)
        if spec.content_type is not None and media_type(spec.content_type) != media_type(
            source.content_type
        ):
            return CreateOutcome(CreateStatus.CONTENT_TYPE_MISMATCH, source)
        anchor = source.tail if fork.anchor is None else fork.anchor
        if anchor > source.tail:
            return CreateOutcome(CreateStatus.OFFSET_BEYOND_TAIL, source)
        position = self._advance(source, anchor, fork.sub_offset)
        if position is None:
            return CreateOutcome(CreateStatus.SUB_OFFSET_OVERSHOOT, source)
        return source, position

    def _advance(self, source: StreamInfo, anchor: int, units: int) -> int | None:
        """The position `units` past `anchor`: messages for JSON, bytes otherwise."""
        if units == 0:
            return anchor
        if not is_json(source.content_type):
            return anchor + units if anchor + units <= source.tail else None
        position, remaining = anchor, units
        while remaining > 0 and position < source.tail:
            batch = self.read(source, position, 1 << 20)
            for message in (batch.messages or ())[:remaining]:
                position += len(message)
                remaining -= 1
            if batch.end == position and not batch.messages:
                break
        return position if remaining == 0 else None

    def _new_stream(
        self,
        path: str,
        spec: CreateSpec,
        now: float,
        source: StreamInfo | None,
        position: int,
    ) -> StreamInfo:
        content_type = spec.content_type or DEFAULT_CONTENT_TYPE
        ttl, expires_at = spec.ttl_seconds, spec.expires_at
        if source is not None:
            content_type = source.content_type
            ttl, expires_at = inherit_expiry(
                source.ttl_seconds, source.expires_at, spec.ttl_seconds, spec.expires_at
            )
        return StreamInfo(
            path=path,
            incarnation=_new_incarnation(now),
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
        )

    def _commit_create(
        self,
        info: StreamInfo,
        payload: Payload,
        body: _StoredBody | None,
        replacing: StreamInfo | None,
        source: StreamInfo | None,
    ) -> None:
        put: dict[str, Any] = {"TableName": self.table, "Item": items.encode_stream(info)}
        actions: list[dict[str, Any]] = [{"Put": put}]
        if replacing is None:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            # Replace exactly the expired, unreferenced incarnation we looked at.
            put["ConditionExpression"] = "#inc = :old AND #refs = :zero"
            put["ExpressionAttributeNames"] = {"#inc": "inc", "#refs": "refs"}
            put["ExpressionAttributeValues"] = {
                ":old": items.s(replacing.incarnation),
                ":zero": items.n(0),
            }
            actions.extend(self._retire_actions(replacing))
        if body is not None:
            start = info.fork_position
            actions.append({"Put": self._chunk_put(info.incarnation, start, payload, body)})
        if source is not None:
            actions.append({"Update": self._reference(source, info.fork_position)})
        self._write(actions)

    def _reference(self, source: StreamInfo, position: int) -> dict[str, Any]:
        """Count one more fork on a source that is still live, as we read it."""
        now = self.clock()
        values: dict[str, Any] = {
            ":inc": items.s(source.incarnation),
            ":one": items.n(1),
            ":position": items.n(position),
            ":now": items.n(now),
        }
        condition = "#inc = :inc AND attribute_not_exists(#del) AND #tail >= :position"
        if source.expires_at is not None:
            condition += " AND #exp > :now"
        if source.ttl_seconds is not None:
            condition += " AND #acc > :dead"
            values[":dead"] = items.n(now - source.ttl_seconds)
        names = {"#inc": "inc", "#del": "del", "#tail": "tail", "#refs": "refs"}
        if source.expires_at is not None:
            names["#exp"] = "exp"
        if source.ttl_seconds is not None:
            names["#acc"] = "acc"
        return {
            "TableName": self.table,
            "Key": items.stream_key(source.path),
            "UpdateExpression": "SET #refs = #refs + :one",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    # ---------------------------------------------------------------- append

    def append(self, path: str, intent: AppendIntent, payload: Payload) -> AppendOutcome:
        # Writers to one stream in this process take turns: they would only lose races to
        # each other. Correctness still rests on the conditional commit, not on this lock,
        # since other processes (other Lambda instances) append to the same stream.
        with self._stream_locks.lock_for(path):
            return self._append(path, intent, payload)

    def _append(self, path: str, intent: AppendIntent, payload: Payload) -> AppendOutcome:
        body: _StoredBody | None = None
        producer_id = intent.producer.producer_id if intent.producer else None
        for _ in self._attempts():
            raw, producer_item = self._get_for_write(path, producer_id)
            info = self._live(raw)
            if info is None:
                return AppendOutcome(Presence.NOT_FOUND)
            if info.soft_deleted:
                return AppendOutcome(Presence.GONE)
            producer = items.decode_producer(producer_item, info.incarnation)
            decision = decide_append(
                WriteState(
                    content_type=info.content_type,
                    closed=info.closed,
                    closed_by=info.closed_by,
                    last_stream_seq=info.last_stream_seq,
                    producer=producer,
                ),
                intent,
            )
            if not decision.commits:
                reported = decision.producer.state if decision.producer else None
                return AppendOutcome(Presence.FOUND, decision, info, reported)
            if body is None and len(payload):
                body = self._store_body(info.incarnation, payload)
            new_producer = decision.producer.state if decision.producer else None
            after = self._appended(info, intent, payload)
            try:
                self._commit_append(info, after, payload, body, intent, producer, new_producer)
            except _Conflict:
                continue
            return AppendOutcome(Presence.FOUND, decision, after, new_producer)
        raise StoreUnavailable("append kept losing races")

    def _appended(self, info: StreamInfo, intent: AppendIntent, payload: Payload) -> StreamInfo:
        return replace(
            info,
            tail=info.tail + len(payload),
            closed=info.closed or intent.close,
            closed_by=intent.producer if intent.close else info.closed_by,
            last_stream_seq=intent.stream_seq or info.last_stream_seq,
            last_access=self.clock(),
        )

    def _commit_append(
        self,
        before: StreamInfo,
        after: StreamInfo,
        payload: Payload,
        body: _StoredBody | None,
        intent: AppendIntent,
        producer_before: ProducerState | None,
        producer_after: ProducerState | None,
    ) -> None:
        sets = ["#tail = :tail", "#acc = :acc"]
        values: dict[str, Any] = {
            ":tail": items.n(after.tail),
            ":acc": items.n(after.last_access),
            ":inc": items.s(before.incarnation),
            ":old_tail": items.n(before.tail),
            ":false": {"BOOL": False},
        }
        names = {"#tail": "tail", "#acc": "acc", "#inc": "inc", "#closed": "closed", "#del": "del"}
        if intent.close:
            sets.append("#closed = :true")
            values[":true"] = {"BOOL": True}
            if intent.producer is not None:
                sets.append("#cb = :cb")
                names["#cb"] = "cb"
                values[":cb"] = items.encode_claim(intent.producer)
        if intent.stream_seq is not None:
            sets.append("#sseq = :sseq")
            names["#sseq"] = "sseq"
            values[":sseq"] = items.s(intent.stream_seq)
        update = {
            "TableName": self.table,
            "Key": items.stream_key(before.path),
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": (
                "#inc = :inc AND #tail = :old_tail AND #closed = :false"
                " AND attribute_not_exists(#del)"
            ),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        actions: list[dict[str, Any]] = [{"Update": update}]
        if body is not None:
            actions.append({"Put": self._chunk_put(before.incarnation, before.tail, payload, body)})
        if intent.producer is not None and producer_after is not None:
            actions.append(
                {
                    "Put": self._producer_put(
                        before, intent.producer.producer_id, producer_before, producer_after
                    )
                }
            )
        if len(actions) == 1:
            self._update_single(update)
        else:
            self._write(actions)

    def _producer_put(
        self,
        info: StreamInfo,
        producer_id: str,
        before: ProducerState | None,
        after: ProducerState,
    ) -> dict[str, Any]:
        put: dict[str, Any] = {
            "TableName": self.table,
            "Item": {
                **items.producer_key(info.path, producer_id),
                "inc": items.s(info.incarnation),
                "ep": items.n(after.epoch),
                "sq": items.n(after.last_seq),
            },
            "ExpressionAttributeNames": {"#inc": "inc"},
        }
        if before is None:
            # Absent, or left over from an earlier incarnation of this path.
            put["ConditionExpression"] = "attribute_not_exists(pk) OR #inc <> :inc"
            put["ExpressionAttributeValues"] = {":inc": items.s(info.incarnation)}
        else:
            put["ConditionExpression"] = "#inc = :inc AND #ep = :ep AND #sq = :sq"
            put["ExpressionAttributeNames"].update({"#ep": "ep", "#sq": "sq"})
            put["ExpressionAttributeValues"] = {
                ":inc": items.s(info.incarnation),
                ":ep": items.n(before.epoch),
                ":sq": items.n(before.last_seq),
            }
        return put

    # ---------------------------------------------------------------- data

    def _store_body(self, incarnation: str, payload: Payload) -> _StoredBody:
        """Small bodies travel inline in the commit; large ones go to S3 first, under a fresh
        key, so a failed commit leaves only an unreachable object for the collector."""
        lengths = (
            items.pack_lengths(payload.message_lengths)
            if payload.message_lengths is not None
            else None
        )
        index_size = len(lengths or b"")
        if len(payload) <= self.inline_max_bytes and index_size <= _INLINE_INDEX_MAX_BYTES:
            return _StoredBody(inline=payload.data, lengths=lengths)
        key = f"data/{incarnation}/{uuid.uuid4().hex}"
        self._call(self.s3.put_object, Bucket=self.bucket, Key=key, Body=payload.data)
        if lengths is not None and index_size > _INLINE_INDEX_MAX_BYTES:
            self._call(self.s3.put_object, Bucket=self.bucket, Key=f"{key}.idx", Body=lengths)
            return _StoredBody(s3_key=key, lengths_key=f"{key}.idx")
        return _StoredBody(s3_key=key, lengths=lengths)

    def _chunk_put(
        self, incarnation: str, start: int, payload: Payload, body: _StoredBody
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            "pk": items.s(items.chunk_partition(incarnation)),
            "sk": items.s(items.chunk_sort_key(start + len(payload))),
            "st": items.n(start),
        }
        if body.inline is not None:
            item["b"] = {"B": body.inline}
        if body.s3_key is not None:
            item["k"] = items.s(body.s3_key)
        if body.lengths is not None:
            item["ml"] = {"B": body.lengths}
        if body.lengths_key is not None:
            item["mk"] = items.s(body.lengths_key)
        return {
            "TableName": self.table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(pk)",
        }

    def read(self, info: StreamInfo, start: int, max_bytes: int) -> ReadBatch:
        json_mode = is_json(info.content_type)
        data: list[bytes] = []
        messages: list[bytes] = []
        position = start
        budget = max_bytes
        for segment in info.segments():
            if segment.end <= position or budget <= 0:
                continue
            for chunk in self._chunks(segment, position):
                lo = max(position, chunk.start)
                hi = min(segment.end, chunk.end)
                if json_mode:
                    taken, position, budget = self._take_messages(
                        chunk, lo, hi, budget, first=not messages
                    )
                    messages.extend(taken)
                else:
                    size = min(hi - lo, budget)
                    data.append(self._chunk_bytes(chunk, lo, lo + size))
                    position, budget = lo + size, budget - size
                if budget <= 0 or position < hi:
                    break
            if budget <= 0 or position < segment.end:
                break
        if json_mode:
            return ReadBatch(start, position, messages=tuple(messages))
        return ReadBatch(start, position, data=b"".join(data))

    def _take_messages(
        self, chunk: _Chunk, lo: int, hi: int, budget: int, first: bool
    ) -> tuple[list[bytes], int, int]:
        """Whole messages of one chunk within [lo, hi), as many as fit the budget (at least
        one per response, however large, so a reader always makes progress)."""
        lengths = chunk.lengths
        if lengths is None and chunk.lengths_key is not None:
            lengths = items.unpack_lengths(self._s3_get(chunk.lengths_key))
        bounds: list[tuple[int, int]] = []
        cursor = chunk.start
        for length in lengths or ():
            if cursor >= lo and cursor + length <= hi:
                if budget < length and not (first and not bounds):
                    break
                bounds.append((cursor, cursor + length))
                budget -= length
            cursor += length
        if not bounds:
            return [], lo, budget
        raw = self._chunk_bytes(chunk, bounds[0][0], bounds[-1][1])
        base = bounds[0][0]
        taken = [raw[a - base : b - base] for a, b in bounds]
        return taken, bounds[-1][1], budget

    def _chunks(self, segment: Segment, position: int) -> Iterator[_Chunk]:
        """Chunks of one incarnation that end after `position` and start before the segment
        ends. Stopping at the segment's end keeps out chunks committed after the metadata we
        hold, and the source's appends after a fork point; a chunk that straddles a fork point
        is included and cut by the caller."""
        low = max(position, segment.start) + 1
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk >= :lo",
            "ExpressionAttributeValues": {
                ":pk": items.s(items.chunk_partition(segment.incarnation)),
                ":lo": items.s(items.chunk_sort_key(low)),
            },
            "ConsistentRead": True,
            "Limit": _QUERY_PAGE_ITEMS,
        }
        while True:
            response = self._call(self.dynamodb.query, **request)
            for item in response.get("Items", []):
                if not item["sk"]["S"].startswith("c#"):
                    return
                chunk = _decode_chunk(item)
                if chunk.start >= segment.end:
                    return
                yield chunk
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def _chunk_bytes(self, chunk: _Chunk, lo: int, hi: int) -> bytes:
        if hi <= lo:
            return b""
        if chunk.inline is not None:
            return chunk.inline[lo - chunk.start : hi - chunk.start]
        assert chunk.s3_key is not None
        if lo == chunk.start and hi == chunk.end:
            return self._s3_get(chunk.s3_key)
        byte_range = f"bytes={lo - chunk.start}-{hi - chunk.start - 1}"
        return self._s3_get(chunk.s3_key, byte_range)

    def _s3_get(self, key: str, byte_range: str | None = None) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if byte_range is not None:
            kwargs["Range"] = byte_range
        response = self._call(self.s3.get_object, **kwargs)
        return bytes(response["Body"].read())

    # ---------------------------------------------------------------- TTL

    def renew(self, info: StreamInfo) -> None:
        if info.ttl_seconds is None:
            return
        now = self.clock()
        if now - info.last_access < info.ttl_seconds * self.renew_fraction:
            return
        # A failed condition means someone else renewed it, or it expired: nothing to do.
        with contextlib.suppress(_Conflict):
            self._update_single(
                {
                    "TableName": self.table,
                    "Key": items.stream_key(info.path),
                    "UpdateExpression": "SET #acc = :now",
                    # Never resurrect an expired stream; never move the access time back.
                    "ConditionExpression": "#inc = :inc AND #acc > :dead AND #acc < :now",
                    "ExpressionAttributeNames": {"#acc": "acc", "#inc": "inc"},
                    "ExpressionAttributeValues": {
                        ":now": items.n(now),
                        ":dead": items.n(now - info.ttl_seconds),
                        ":inc": items.s(info.incarnation),
                    },
                }
            )

    # ---------------------------------------------------------------- delete and lifecycle

    def delete(self, path: str) -> Presence:
        for _ in self._attempts():
            raw = self._get_raw(path)
            info = self._live(raw)
            if info is None:
                return Presence.NOT_FOUND
            if info.soft_deleted:
                return Presence.GONE
            try:
                if info.ref_count > 0:
                    self._soft_delete(info)
                else:
                    self._hard_delete(info)
            except _Conflict:
                continue
            return Presence.FOUND
        raise StoreUnavailable("delete kept losing races")

    def finish_lifecycle(self, info: StreamInfo) -> bool:
        """For the collector: reap an expired stream nobody touched, or finish a cascade that
        was interrupted (soft-deleted, no forks left). True when something was done."""
        try:
            if info.soft_deleted and info.ref_count == 0:
                self._hard_delete(info)
                return True
            if not info.soft_deleted and info.is_expired(self.clock()):
                self._reap(info)
                return True
        except _Conflict:
            pass  # it changed under us; the next run looks again
        return False

    def _reap(self, info: StreamInfo) -> None:
        """Finish an expired stream: gone if nothing forks it, else soft-deleted for its forks."""
        if info.ref_count > 0:
            self._soft_delete(info)
        else:
            self._hard_delete(info)

    def _soft_delete(self, info: StreamInfo) -> None:
        self._update_single(
            {
                "TableName": self.table,
                "Key": items.stream_key(info.path),
                "UpdateExpression": "SET #del = :true",
                "ConditionExpression": (
                    "#inc = :inc AND #refs > :zero AND attribute_not_exists(#del)"
                ),
                "ExpressionAttributeNames": {"#del": "del", "#inc": "inc", "#refs": "refs"},
                "ExpressionAttributeValues": {
                    ":true": {"BOOL": True},
                    ":inc": items.s(info.incarnation),
                    ":zero": items.n(0),
                },
            }
        )

    def _hard_delete(self, info: StreamInfo) -> None:
        """Remove an unreferenced stream, retire its data and release its source; then, if
        that source was soft-deleted and this was its last fork, remove it too (cascade)."""
        self._write(
            [
                {
                    "Delete": {
                        "TableName": self.table,
                        "Key": items.stream_key(info.path),
                        "ConditionExpression": "#inc = :inc AND #refs = :zero",
                        "ExpressionAttributeNames": {"#inc": "inc", "#refs": "refs"},
                        "ExpressionAttributeValues": {
                            ":inc": items.s(info.incarnation),
                            ":zero": items.n(0),
                        },
                    }
                },
                *self._retire_actions(info),
            ]
        )
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
        with contextlib.suppress(_Conflict):
            self._hard_delete(source)

    def _retire_actions(self, info: StreamInfo) -> list[dict[str, Any]]:
        """Mark the incarnation's data for the collector and release the fork's source."""
        actions: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.table,
                    "Item": {
                        **items.retire_key(info.incarnation),
                        "path": items.s(info.path),
                        "at": items.n(self.clock()),
                    },
                }
            }
        ]
        if info.forked_from is not None and info.source_incarnation is not None:
            actions.append(
                {
                    "Update": {
                        "TableName": self.table,
                        "Key": items.stream_key(info.forked_from),
                        "UpdateExpression": "SET #refs = #refs - :one",
                        "ConditionExpression": "#inc = :inc AND #refs > :zero",
                        "ExpressionAttributeNames": {"#refs": "refs", "#inc": "inc"},
                        "ExpressionAttributeValues": {
                            ":one": items.n(1),
                            ":zero": items.n(0),
                            ":inc": items.s(info.source_incarnation),
                        },
                    }
                }
            )
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
            if attempt > 3:
                time.sleep(min(0.05, 0.002 * attempt))

    def _write(self, actions: list[dict[str, Any]]) -> None:
        """One atomic commit. The request token makes botocore's own retries of a timed-out
        attempt idempotent, so a transport retry can never apply the same commit twice."""
        self._call(
            self.dynamodb.transact_write_items,
            TransactItems=actions,
            ClientRequestToken=uuid.uuid4().hex,
        )

    def _update_single(self, update: dict[str, Any]) -> None:
        self._call(self.dynamodb.update_item, **update)

    def _call(self, operation: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return operation(**kwargs)
        except ClientError as exc:
            if is_condition_failure(exc):
                raise _Conflict() from exc
            if is_unavailable(exc):
                raise StoreUnavailable(str(exc)) from exc
            raise
        except BotoCoreError as exc:
            raise StoreUnavailable(str(exc)) from exc


def _decode_chunk(item: dict[str, Any]) -> _Chunk:
    end = int(item["sk"]["S"][2:])
    packed = item.get("ml", {}).get("B")
    return _Chunk(
        start=int(item["st"]["N"]),
        end=end,
        inline=bytes(item["b"]["B"]) if "b" in item else None,
        s3_key=item["k"]["S"] if "k" in item else None,
        lengths=items.unpack_lengths(bytes(packed)) if packed is not None else None,
        lengths_key=item["mk"]["S"] if "mk" in item else None,
    )


def _new_incarnation(now: float) -> str:
    # Time-ordered prefix for readable listings; the random part makes it unique.
    return f"{int(now * 1000):013x}{uuid.uuid4().hex[:16]}"
