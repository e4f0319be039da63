"""Chunk storage: where appended bytes live and how reads put them back together.

Small bodies travel inline in the chunk item of the commit; large ones go to S3 first, under a
fresh key per request, so a failed commit leaves only an unreachable object for the collector.
A chunk item is keyed by its end position, so a read finds the first chunk past an offset with
one Query and costs what it returns, not what the stream holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..protocol.headers import is_json
from . import _items as items
from .aws import call
from .model import Payload, ReadBatch, Segment, StreamInfo

# Well below DynamoDB's 400 KB item limit, leaving room for the message-length index.
DEFAULT_INLINE_MAX_BYTES = 64 * 1024
# Packed message lengths above this size go to S3 beside the chunk's bytes.
_INLINE_INDEX_MAX_BYTES = 64 * 1024
_QUERY_PAGE_ITEMS = 500
DATA_ROOT = "data/"


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    inline: bytes | None
    s3_key: str | None
    lengths: tuple[int, ...] | None
    lengths_key: str | None


@dataclass(frozen=True)
class StoredBody:
    """Where a payload lives once written: inline in the chunk item or in S3. It belongs to
    the incarnation it was stored for and may only be committed as a chunk of that one."""

    incarnation: str
    inline: bytes | None = None
    s3_key: str | None = None
    lengths: bytes | None = None
    lengths_key: str | None = None


class ChunkStore:
    def __init__(
        self, dynamodb: Any, s3: Any, table: str, bucket: str, inline_max_bytes: int
    ) -> None:
        self.dynamodb = dynamodb
        self.s3 = s3
        self.table = table
        self.bucket = bucket
        self.inline_max_bytes = inline_max_bytes

    def store_body(self, incarnation: str, payload: Payload) -> StoredBody:
        """Small bodies travel inline in the commit; large ones go to S3 first, under a fresh
        key, so a failed commit leaves only an unreachable object for the collector."""
        lengths = (
            items.pack_lengths(payload.message_lengths)
            if payload.message_lengths is not None
            else None
        )
        index_size = len(lengths or b"")
        if len(payload) <= self.inline_max_bytes and index_size <= _INLINE_INDEX_MAX_BYTES:
            return StoredBody(incarnation, inline=payload.data, lengths=lengths)
        key = f"{data_prefix(incarnation)}{uuid.uuid4().hex}"
        call(self.s3.put_object, Bucket=self.bucket, Key=key, Body=payload.data)
        if lengths is not None and index_size > _INLINE_INDEX_MAX_BYTES:
            call(self.s3.put_object, Bucket=self.bucket, Key=f"{key}.idx", Body=lengths)
            return StoredBody(incarnation, s3_key=key, lengths_key=f"{key}.idx")
        return StoredBody(incarnation, s3_key=key, lengths=lengths)

    def body_for(
        self, incarnation: str, payload: Payload, stored: StoredBody | None
    ) -> StoredBody | None:
        """The body to commit to `incarnation`: one stored by an earlier attempt for that same
        incarnation is reused; anything else is stored afresh (an upload for another
        incarnation is left to the collector as an orphan)."""
        if not len(payload):
            return None
        if stored is not None and stored.incarnation == incarnation:
            return stored
        return self.store_body(incarnation, payload)

    def chunk_put(
        self, incarnation: str, start: int, payload: Payload, body: StoredBody
    ) -> dict[str, Any]:
        if body.incarnation != incarnation:
            # The collector removes objects with the incarnation they were stored for: a body
            # committed to another one would be destroyed after it was acknowledged.
            raise ValueError(
                f"a body stored for incarnation {body.incarnation} cannot be committed to "
                f"{incarnation}"
            )
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
        """Committed data from `start`: about `max_bytes` of it, counted as the read's body
        (for JSON the array it is served as, separators included)."""
        json_mode = is_json(info.content_type)
        data: list[bytes] = []
        messages: list[bytes] = []
        position = start
        # JSON: "[" + messages joined by "," + "]" is one byte per message more than they are.
        budget = max_bytes - 1 if json_mode else max_bytes

        def spent() -> bool:  # the budget is used up, and the reader has made progress
            return budget <= 0 and position > start

        for segment in info.segments():
            if segment.end <= position or spent():
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
                if spent() or position < hi:
                    break
            if spent() or position < segment.end:
                break
        if json_mode:
            return ReadBatch(start, position, messages=tuple(messages))
        return ReadBatch(start, position, data=b"".join(data))

    def _take_messages(
        self, chunk: Chunk, lo: int, hi: int, budget: int, first: bool
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
                served = length + 1  # with its separator
                if budget < served and not (first and not bounds):
                    break
                bounds.append((cursor, cursor + length))
                budget -= served
            cursor += length
        if not bounds:
            return [], lo, budget
        raw = self._chunk_bytes(chunk, bounds[0][0], bounds[-1][1])
        base = bounds[0][0]
        taken = [raw[a - base : b - base] for a, b in bounds]
        return taken, bounds[-1][1], budget

    def boundaries(self, info: StreamInfo, start: int, end: int) -> Iterator[int]:
        """The positions strictly between `start` and `end` where stored chunks end, in order:
        every one is a message boundary, so a range may be split there (a bulk job's
        partitions). Only keys are read."""
        for segment in info.segments():
            lo, hi = max(start, segment.start) + 1, min(end, segment.end) - 1
            if lo > hi:  # no position strictly inside both (DynamoDB refuses BETWEEN hi, lo)
                if start < segment.end < end:
                    yield segment.end
                continue
            request: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
                "ExpressionAttributeValues": {
                    ":pk": items.s(items.chunk_partition(segment.incarnation)),
                    ":lo": items.s(items.chunk_sort_key(lo)),
                    ":hi": items.s(items.chunk_sort_key(hi)),
                },
                "ProjectionExpression": "sk",
            }
            for item in self._query(request):
                yield int(item["sk"]["S"].removeprefix("c#"))
            if start < segment.end < end:
                yield segment.end  # where a fork's inherited range gives way to the next

    def _chunks(self, segment: Segment, position: int) -> Iterator[Chunk]:
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
        for item in self._query(request):
            if not item["sk"]["S"].startswith("c#"):
                return
            chunk = _decode(item)
            if chunk.start >= segment.end:
                return
            yield chunk

    def _query(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The items of a query, page after page (pages are read as they are needed)."""
        request = dict(request)
        while True:
            response = call(self.dynamodb.query, **request)
            yield from response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def _chunk_bytes(self, chunk: Chunk, lo: int, hi: int) -> bytes:
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
        response = call(self.s3.get_object, **kwargs)
        return bytes(response["Body"].read())


def data_prefix(incarnation: str) -> str:
    """Where the S3 objects of one incarnation live; the collector removes them together."""
    return f"{DATA_ROOT}{incarnation}/"


def _decode(item: dict[str, Any]) -> Chunk:
    end = int(item["sk"]["S"][2:])
    packed = item.get("ml", {}).get("B")
    return Chunk(
        start=int(item["st"]["N"]),
        end=end,
        inline=bytes(item["b"]["B"]) if "b" in item else None,
        s3_key=item["k"]["S"] if "k" in item else None,
        lengths=items.unpack_lengths(bytes(packed)) if packed is not None else None,
        lengths_key=item["mk"]["S"] if "mk" in item else None,
    )
