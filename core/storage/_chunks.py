"""Chunk storage: where appended bytes live and how reads put them back together.

Small bodies travel inline in the chunk item of the commit; large ones go to S3 first, under a
fresh key per request, so a failed commit leaves only an unreachable object for the collector.
A chunk item is keyed by its end position, so a read finds the first chunk past an offset with
one Query and costs what it returns, not what the stream holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from ..protocol.headers import is_json
from . import _items as items
from . import _segments as layout
from ._chunk_cache import ChunkCache
from ._chunk_layout import Chunk, ObjectGone, data_prefix, decode_chunk, incarnation_of
from ._read_ahead import ReadPlan, read_ahead
from ._segment_cache import SegmentCache
from ._snapshots import SnapshotCache, decode_snapshot
from .aws import call, each_item, error_code, pages
from .model import Payload, ReadBatch, Segment, Snapshot, StoreUnavailable, StreamInfo

# Well below DynamoDB's 400 KB item limit, leaving room for the message-length index.
DEFAULT_INLINE_MAX_BYTES = 64 * 1024
# Packed message lengths above this size go to S3 beside the chunk's bytes.
_INLINE_INDEX_MAX_BYTES = 64 * 1024
_QUERY_PAGE_ITEMS = 500
# What the chunks this process committed or read may hold in memory (`ChunkCache`).
DEFAULT_CHUNK_CACHE_BYTES = 32 * 1024 * 1024
# Reads started again when an object vanished under them (see ObjectGone).
_GONE_RETRIES = 4


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
        self,
        dynamodb: Any,
        s3: Any,
        table: str,
        bucket: str,
        inline_max_bytes: int,
        cache_bytes: int = DEFAULT_CHUNK_CACHE_BYTES,
    ) -> None:
        self.dynamodb = dynamodb
        self.s3 = s3
        self.table = table
        self.bucket = bucket
        self.inline_max_bytes = inline_max_bytes
        self.segments = SegmentCache()
        self.snapshots = SnapshotCache()
        self.recent = ChunkCache(cache_bytes)

    def committed(self, actions: Iterable[dict[str, Any]]) -> None:
        """A transaction of these actions committed: the chunks it wrote are readable as they
        are, once the stream's tail reaches them (`ChunkCache`)."""
        for action in actions:
            item = action.get("Put", {}).get("Item", {})
            partition = item.get("pk", {}).get("S", "")
            if partition.startswith(items.CHUNK_PREFIX) and "st" in item:
                incarnation = partition.removeprefix(items.CHUNK_PREFIX)
                self.recent.remember(incarnation, [decode_chunk(item)])

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
        self, incarnation: str, start: int, payload: Payload, body: StoredBody, number: int = 0
    ) -> dict[str, Any]:
        if body.incarnation != incarnation:
            # The collector removes objects with the incarnation they were stored for: a body
            # committed to another one would be destroyed after it was acknowledged.
            raise ValueError(
                f"a body stored for incarnation {body.incarnation} cannot be committed to "
                f"{incarnation}"
            )
        item: dict[str, Any] = {
            **items.chunk_key(incarnation, start + len(payload)),
            "st": items.n(start),
        }
        if number:
            item["n"] = items.n(number)
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

    def read(self, info: StreamInfo, start: int, max_bytes: int, whole: bool = False) -> ReadBatch:
        """Committed data from `start`: about `max_bytes` of it, counted as the read's body
        (for JSON the array it is served as, separators included), in whole appends (messages,
        for JSON) unless the first alone is larger. `whole`: when `start` lies inside an append
        (a message), the batch starts at that append's start.

        Sealing may replace the items a read is walking (see `core.storage.sealer`); the bytes
        of every position stay the same, so a read that finds an object gone only has to look
        again."""
        for _ in range(_GONE_RETRIES):
            try:
                return self._read(info, start, max_bytes, whole)
            except ObjectGone as gone:
                self.segments.forget(incarnation_of(gone.key))
        raise StoreUnavailable("stored objects kept changing under the read; retry")

    def _read(self, info: StreamInfo, start: int, max_bytes: int, whole: bool) -> ReadBatch:
        """A batch's bytes are contiguous: void ranges (which hold nothing) at its start are
        passed over, moving the batch's start past them, and it ends before any other."""
        json_mode = is_json(info.content_type)
        data: list[bytes] = []
        ends: list[int] = []
        messages: list[bytes] = []
        position = start
        # JSON: "[" + messages joined by "," + "]" is one byte per message more than they are.
        budget = max_bytes - 1 if json_mode else max_bytes

        def spent() -> bool:  # the budget is used up, and the reader has made progress
            return budget <= 0 and position > start

        voided = False
        for segment in info.segments():
            if segment.end <= position or spent():
                continue
            # The sealer's hint of where this stream's own sealed history ends.
            sealed = info.sealed if segment.incarnation == info.incarnation else 0
            reach = position + max(budget, 0)
            # The objects of chunks are fetched ahead, those after sealed history included.
            plan = ReadPlan(max(position, segment.start), budget, segment.end, json_mode)
            walk = self._chunks(segment, position, reach, sealed)
            chunks = read_ahead(walk, self._s3_get, plan)
            for chunk in chunks:
                if chunk.start > max(position, segment.start):
                    # A chunk a segment replaced, whose neighbours are already deleted:
                    # the item holding `position` is that segment, further on.
                    continue
                lo = max(position, chunk.start)
                hi = min(segment.end, chunk.end)
                if chunk.void:
                    if data or messages:
                        voided = True  # the batch ends where the void begins
                        break
                    start = position = hi  # nothing taken yet: the batch starts after it
                    if position >= segment.end:
                        break
                    continue
                first = not (data or messages)
                snap = whole and first
                span = Span(max(chunk.start, segment.start), lo, hi, budget, first, snap)
                if json_mode:
                    take = self._take_sealed if chunk.sealed else self._take_messages
                    taken, begin, position, budget = take(chunk, span)
                    messages.extend(taken)
                else:
                    take_bytes = self._take_sealed_bytes if chunk.sealed else self._take_bytes
                    piece, begin, position, budget = take_bytes(chunk, span)
                    if piece:
                        data.append(piece.data)
                        ends.extend(piece.ends)
                if first and begin < lo:
                    start = begin  # read from the start of the append `start` was inside
                if spent() or position < hi or position >= segment.end:
                    break
            if voided or spent() or position < segment.end:
                break
        if json_mode:
            return ReadBatch(start, position, messages=tuple(messages))
        return ReadBatch(start, position, data=b"".join(data), ends=tuple(ends))

    def _take_bytes(self, chunk: Chunk, span: Span) -> tuple[Taken | None, int, int, int]:
        """The bytes of one append (a chunk) within [lo, hi): all of them if they fit the
        budget, the budget's worth when they are the first of a response, else none."""
        lo = span.floor if span.snap else span.lo
        size = span.hi - lo
        if size > span.budget:
            if not span.first:
                return None, span.lo, span.lo, span.budget
            size = max(span.budget, 1)
        end = lo + size
        piece = Taken(self._chunk_bytes(chunk, lo, end), (end,) if end == span.hi else ())
        return piece, lo, end, span.budget - size

    def _take_messages(self, chunk: Chunk, span: Span) -> tuple[list[bytes], int, int, int]:
        """Whole messages of one chunk within [lo, hi), as many as fit the budget (at least
        one per response, however large, so a reader always makes progress)."""
        lengths = chunk.lengths
        if lengths is None and chunk.lengths_key is not None:
            lengths = items.unpack_lengths(self._s3_get(chunk.lengths_key))
        if lengths and _whole(span, chunk.start, chunk.end, len(lengths)):
            # The common catch-up: the whole chunk fits, so every message of it is taken.
            taken = layout.cut(self._chunk_bytes(chunk, chunk.start, chunk.end), lengths)
            return taken, chunk.start, chunk.end, span.budget - chunk.end + chunk.start - len(taken)
        spans = list(_spans(chunk.start, lengths or ()))
        lo = _snapped(spans, span)
        bounds, budget = _fitting(spans, lo, span.hi, span.budget, span.first)
        if not bounds:
            return [], lo, lo, budget
        raw = self._chunk_bytes(chunk, bounds[0][0], bounds[-1][1])
        base = bounds[0][0]
        taken = [raw[a - base : b - base] for a, b in bounds]
        return taken, lo, bounds[-1][1], budget

    def _take_sealed(self, segment: Chunk, span: Span) -> tuple[list[bytes], int, int, int]:
        """Whole messages of a sealed segment within [lo, hi). The pages that fit the budget
        whole are one ranged GET, headers included; when not even the first one does, its
        header and then just the messages that fit (two small GETs). A read that has taken
        something already stops at a page boundary rather than pay for a partial page."""
        assert segment.pages is not None and segment.s3_key is not None
        lo, hi, budget = span.lo, span.hi, span.budget
        directory = segment.pages
        first_page = layout.page_at(directory, lo)
        last_page, estimate = first_page - 1, 0
        for index in range(first_page, len(directory)):
            page = directory[index]
            size = page.served_size(page.position if span.snap else lo, hi)
            if page.position >= hi or estimate + size > budget:
                break
            last_page, estimate = index, estimate + size
        found: list[tuple[int, bytes]] = []
        if last_page >= first_page:
            base = directory[first_page].offset
            raw = self._s3_get(segment.s3_key, _range(base, directory[last_page].object_end))
            taking = directory[first_page : last_page + 1]
            if directory[first_page].position == lo and directory[last_page].end <= hi:
                # Whole pages, which the budget was just found to hold: every message of them.
                whole = [
                    message
                    for page in taking
                    for message in layout.page_messages(
                        page, raw[page.offset - base : page.object_end - base]
                    )
                ]
                return whole, lo, directory[last_page].end, budget - estimate
            for page in taking:
                part = raw[page.offset - base : page.object_end - base]
                found.extend(layout.messages_of(page, part))
        elif span.first:
            page = directory[first_page]
            header = self._s3_get(segment.s3_key, _range(page.offset, page.data_offset))
            spans = list(_spans(page.position, items.unpack_lengths(header)))
            lo = _snapped(spans, span)
            bounds, _ = _fitting(spans, lo, hi, budget, span.first)
            if bounds:
                base = bounds[0][0]
                begin = page.data_offset + base - page.position
                raw = self._s3_get(segment.s3_key, _range(begin, begin + bounds[-1][1] - base))
                found = [(a, raw[a - base : b - base]) for a, b in bounds]
        by_start = dict(found)
        spans = [(a, a + len(message)) for a, message in found]
        lo = _snapped(spans, replace(span, lo=lo))
        bounds, budget = _fitting(spans, lo, hi, budget, span.first)
        if not bounds:
            return [], lo, lo, budget
        return [by_start[a] for a, _ in bounds], lo, bounds[-1][1], budget

    def _take_sealed_bytes(self, segment: Chunk, span: Span) -> tuple[Taken | None, int, int, int]:
        """Bytes of a sealed segment within [lo, hi): the whole pages that fit the budget, one
        ranged GET of the object's bytes; the first page cut to the budget when it is the first
        of a response and does not fit whole. Pages hold whole appends; where each one begins
        inside a page is read from the object's trailer only for a read that starts inside a
        page and must start at its append (one small GET more)."""
        assert segment.pages is not None and segment.s3_key is not None
        directory = segment.pages
        first_page = layout.page_at(directory, span.lo)
        head = directory[first_page]
        lo, head_units = span.lo, None
        if span.snap and head.count and head.position < lo < head.end:
            if head.count == 1:
                lo = head.position
            else:
                units = list(_spans(head.position, self._trailer_lengths(segment, head)))
                lo = max(a for a, _ in units if a <= span.lo)
                head_units = tuple(b - a for a, b in units if a >= lo)
        last_page, estimate = first_page - 1, 0
        for index in range(first_page, len(directory)):
            page = directory[index]
            size = min(page.end, span.hi) - max(lo, page.position)
            if page.position >= span.hi or estimate + size > span.budget:
                break
            last_page, estimate = index, estimate + size
        if last_page < first_page:
            if not span.first:
                return None, span.lo, span.lo, span.budget
            last_page = first_page
            stop = head.data_offset + min(span.hi, lo + span.budget) - head.position
            if head_units is None and head.count > 1:
                # Cut short: between the appends that fit, so where they end is needed.
                units = _spans(head.position, self._trailer_lengths(segment, head))
                head_units = tuple(b - max(a, lo) for a, b in units if b > lo)
        else:
            stop = directory[last_page].object_end
        begin = head.data_offset + lo - head.position
        raw = self._s3_get(segment.s3_key, _range(begin, stop))
        runs = []
        for page in directory[first_page : last_page + 1]:
            start = max(page.position, lo)
            at = page.data_offset + start - page.position - begin
            part = raw[at : min(page.object_end, stop) - begin]
            lengths: tuple[int, ...] | None = None  # appends not known: cut anywhere
            if page is head and head_units is not None:
                lengths = head_units
            elif page.count:
                # The rest of the page as one append: it ends where an append does, and a
                # cut inside it is named exactly.
                lengths = (page.end - start,)
            runs.append(_Run(start, part, lengths))
        return take_runs(runs, replace(span, lo=lo, snap=False))

    def _trailer_lengths(self, segment: Chunk, page: layout.Page) -> tuple[int, ...]:
        """The lengths of a sealed page's appends, from the object's trailer."""
        assert segment.s3_key is not None and page.lengths_at is not None
        end = page.lengths_at + layout.LENGTH_BYTES * page.count
        return items.unpack_lengths(self._s3_get(segment.s3_key, _range(page.lengths_at, end)))

    def snapshot_messages(self, snapshot: Snapshot) -> tuple[bytes, ...]:
        """A snapshot's messages: immutable, so kept once read (`SegmentCache`)."""
        known = self.snapshots.get(snapshot.key)
        if known is None:
            known = decode_snapshot(self._s3_get(snapshot.key))
            self.snapshots.remember(snapshot.key, known)
        return known

    def boundaries(self, info: StreamInfo, start: int, end: int) -> Iterator[int]:
        """The positions strictly between `start` and `end` where stored chunks, and the pages
        of sealed JSON segments, end, in order: every one is a message boundary, so a range may be
        split there (a bulk job's partitions). Only keys and page directories are read."""
        json_mode = is_json(info.content_type)
        for segment in info.segments():
            lo, hi = max(start, segment.start), min(end, segment.end)
            found: set[int] = set()
            if lo < hi:
                request = self._ending_after(segment.incarnation, lo)
                request["ProjectionExpression"] = "sk, pg"
                for item in each_item(self.dynamodb.query, request):
                    item_end = int(item["sk"]["S"].removeprefix("c#"))
                    if "pg" in item and json_mode:  # other pages may end mid-character
                        directory = layout.pages(bytes(item["pg"]["B"]), item_end)
                        found.update(page.position for page in directory)
                    found.add(item_end)
                    if item_end >= hi:
                        break
            found = {p for p in found if lo < p <= hi}
            if start < segment.end < end:
                found.add(segment.end)  # where a fork's inherited range gives way to the next
            yield from sorted(p for p in found if start < p < end)

    def _chunks(
        self, segment: Segment, position: int, reach: int, sealed: int = 0
    ) -> Iterator[Chunk]:
        """Chunks and segments of one incarnation that end after `position`, in order of their
        ends. The caller stops at the segment's end, which keeps out chunks committed after
        the metadata it holds and the source's appends after a fork point; a chunk that
        straddles a fork point is cut by the caller. Sealed segments and chunks this process
        already knows (`SegmentCache`, `ChunkCache`) are served without a Query.

        History before `sealed` (where the stream item says sealed history ends) is read as
        its segments, from memory or queried a page at a time: segment items are small, a
        page of them teaches the segment cache the layout ahead, and every instance answers
        that history in the same batches (pages), whatever chunks it remembers. Where this
        process holds the chunk that follows it, the read goes on past it as one that starts
        there: chunks from memory, then queried.

        A reader whose budget ends at `reach` needs the items that end by `reach` and the one
        that straddles it, which, holding its bytes inline, ends less than an inline chunk
        further: the first query stops there. Only a reader that needs more (the straddler is
        a large chunk in S3, or a segment) queries on, a page at a time. Unbounded, a query
        of 64 KiB chunks read a second 1 MB page to use one chunk of it.
        """
        position = max(position, segment.start)
        while position < segment.end:
            known = self.segments.covering(segment.incarnation, position)
            if known is not None:
                yield known
                position = known.end
                continue
            if position < sealed:
                yield from self._through_sealed_history(segment, position, reach, sealed)
                return
            # Cached chunks, a run at a time, up to the next known segment (which answers
            # its positions first) and not far past what the budget reaches.
            limit = min(segment.end, max(reach, position) + self.inline_max_bytes)
            ahead = self.segments.next_start(segment.incarnation, position)
            run = self.recent.run(
                segment.incarnation, position, limit if ahead is None else min(limit, ahead)
            )
            if not run:
                break
            yield from run
            position = run[-1].end
        else:
            return
        bound = max(reach, position) + self.inline_max_bytes
        yield from self._query_chunks(segment, position, up_to=bound)
        yield from self._query_chunks(segment, bound)

    def _through_sealed_history(
        self, segment: Segment, position: int, reach: int, sealed: int
    ) -> Iterator[Chunk]:
        """Sealed history's items queried from `position`, a page at a time. Where this
        process holds the chunk that follows sealed history, the query stops at `sealed` and
        the read goes on from there as `_chunks` goes, taking the newest chunks from memory;
        otherwise one query goes on through them, as it always did (no second Query for a
        tail this process does not hold). Where the read stands follows its own rule: it
        takes an item that holds its position and passes over any other (a chunk a segment
        replaced, still there)."""
        if self.recent.covering(segment.incarnation, sealed) is None:
            yield from self._query_chunks(segment, position)
            return
        at = position
        history = self._query_chunks(segment, position, up_to=sealed, paged=True)
        for chunk in history:
            yield chunk
            if chunk.start <= at < chunk.end:
                at = chunk.end
        if at < sealed:
            # What holds `at` ends past `sealed` (every item ending by it came, and none held
            # `at`): the sealer has grown a segment since the stream item was read. Queried on
            # past `sealed`, so nothing the history query found comes twice.
            yield from self._query_chunks(segment, sealed)
            return
        yield from self._chunks(segment, at, reach, sealed)

    def _query_chunks(
        self,
        segment: Segment,
        position: int,
        up_to: int | None = None,
        paged: bool = False,
    ) -> Iterator[Chunk]:
        request = self._ending_after(segment.incarnation, position, up_to)
        request["ConsistentRead"] = True
        if up_to is None or paged:
            # Unbounded (or through sealed history), a page of at most this many items: of
            # segment items (small), enough to learn the layout ahead without reading a
            # megabyte of them. A bounded query of chunks asks for what the read needs, in as
            # few pages as DynamoDB's 1 MB allows.
            request["Limit"] = _QUERY_PAGE_ITEMS
        for page in pages(self.dynamodb.query, request):
            found = [decode_chunk(item) for item in page if item["sk"]["S"].startswith("c#")]
            for chunk in found:
                if chunk.sealed:
                    self.segments.remember(segment.incarnation, chunk)
            self.recent.remember(segment.incarnation, found)
            # Items past the segment's end are passed on too: the reader skips them while
            # it looks for a segment that holds its position (replaced chunks may still be
            # there, their neighbours deleted), and stops once it reaches the end.
            yield from found
            if len(found) < len(page):
                return

    def _ending_after(
        self, incarnation: str, position: int, up_to: int | None = None
    ) -> dict[str, Any]:
        """A Query for the items of an incarnation that end after `position` (and by `up_to`,
        when given: a sort key takes one condition, so that one is a BETWEEN), in order."""
        partition = items.s(items.chunk_partition(incarnation))
        if up_to is None:
            condition = "pk = :pk AND sk > :after"
            values = {":pk": partition, ":after": items.s(items.chunk_sort_key(position))}
        else:
            condition = "pk = :pk AND sk BETWEEN :first AND :last"
            values = {
                ":pk": partition,
                ":first": items.s(items.chunk_sort_key(position + 1)),
                ":last": items.s(items.chunk_sort_key(up_to)),
            }
        return {
            "TableName": self.table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }

    def pieces(self, chunk: Chunk, json_mode: bool) -> list[layout.Piece]:
        """All of a chunk's or segment's bytes (with message lengths for JSON), to seal."""
        if chunk.pages is not None:
            assert chunk.s3_key is not None
            return layout.pieces_of(chunk.pages, self._s3_get(chunk.s3_key), json_mode)
        data = self._chunk_bytes(chunk, chunk.start, chunk.end)
        if not json_mode:
            return [layout.Piece(data, (len(data),))]  # one append
        lengths = chunk.lengths
        if lengths is None and chunk.lengths_key is not None:
            lengths = items.unpack_lengths(self._s3_get(chunk.lengths_key))
        return [layout.Piece(data, lengths)]

    def _chunk_bytes(self, chunk: Chunk, lo: int, hi: int) -> bytes:
        if hi <= lo:
            return b""
        if chunk.inline is not None:
            return chunk.inline[lo - chunk.start : hi - chunk.start]
        assert chunk.s3_key is not None
        if lo == chunk.start and hi == chunk.end:
            return self._s3_get(chunk.s3_key)
        return self._s3_get(chunk.s3_key, _range(lo - chunk.start, hi - chunk.start))

    def _s3_get(self, key: str, byte_range: str | None = None) -> bytes:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if byte_range is not None:
            kwargs["Range"] = byte_range
        try:
            response = call(self.s3.get_object, **kwargs)
        except ClientError as exc:
            if error_code(exc) in {"NoSuchKey", "404"}:
                raise ObjectGone(key) from exc
            raise
        return bytes(response["Body"].read())


@dataclass(frozen=True)
class Span:
    """What a read wants of one stored item: the positions [lo, hi), as much of them as fits
    `budget`. `floor`: where the item's first append may begin (its start, or its segment's
    when a fork point cuts it); `first`: nothing is taken yet, so the first append is taken
    however large (cut to the budget); `snap`: `lo` inside an append means its start."""

    floor: int
    lo: int
    hi: int
    budget: int
    first: bool
    snap: bool


@dataclass(frozen=True)
class Taken:
    """Bytes taken from one item, and the positions within them where appends end."""

    data: bytes
    ends: tuple[int, ...]


@dataclass(frozen=True)
class _Run:
    """Consecutive stored bytes from `start`, with the lengths of the appends they hold
    (None: not known, as in segments sealed before appends were recorded)."""

    start: int
    data: bytes
    lengths: tuple[int, ...] | None = None

    @property
    def end(self) -> int:
        return self.start + len(self.data)


def take_runs(runs: Sequence[_Run], span: Span) -> tuple[Taken | None, int, int, int]:
    """Whole appends of `runs` (consecutive) within [lo, hi) that fit the budget, the first
    however large (cut to the budget); where appends are not known, any position is a clean
    cut. Returns the bytes, where they begin (before `lo` when it was inside an append and
    `snap`), where they end, and the budget left."""
    ends: list[int] = []
    budget, position, begin = span.budget, span.lo, span.lo
    taken = False

    def result() -> tuple[Taken | None, int, int, int]:
        if not taken:
            return None, begin, position, budget
        data = b"".join(
            run.data[max(begin, run.start) - run.start : position - run.start]
            for run in runs
            if run.start < position and run.start + len(run.data) > begin
        )
        return Taken(data, tuple(ends)), begin, position, budget

    for run in runs:
        known = run.lengths is not None
        units = _spans(run.start, run.lengths or ()) if known else [(run.start, run.end)]
        for a, b in units:
            b = min(b, span.hi)
            if b <= span.lo or a >= span.hi:
                continue
            at = max(a, span.lo)
            if known and span.snap and not taken and a < span.lo:
                at = begin = max(a, span.floor)
            size = b - at
            if size > budget:
                if known and (taken or not span.first):
                    return result()  # stop before this append
                size = budget  # inside the first append, or anywhere where appends are unknown
            if size <= 0:
                return result()
            taken = True
            position, budget = at + size, budget - size
            if position == b or not known:
                ends.append(position)
            if position < b:
                return result()
    return result()


def _whole(span: Span, start: int, end: int, count: int) -> bool:
    """Whether the read takes all of the item [start, end) holding `count` messages: it lies
    within [lo, hi) and its bytes, with a separator per message, fit the budget."""
    return span.lo <= start and end <= span.hi and end - start + count <= span.budget


def _snapped(spans: Iterable[tuple[int, int]], span: Span) -> int:
    """`span.lo`, or the start of the message it lies inside when the read snaps."""
    if span.snap:
        for a, b in spans:
            if a < span.lo < b:
                return max(a, span.floor)
    return span.lo


def _spans(start: int, lengths: Iterable[int]) -> Iterator[tuple[int, int]]:
    """(start, end) of each message, from the first one's start and the lengths."""
    for length in lengths:
        yield start, start + length
        start += length


def _fitting(
    spans: Iterable[tuple[int, int]], lo: int, hi: int, budget: int, first: bool
) -> tuple[list[tuple[int, int]], int]:
    """The messages within [lo, hi) that fit the budget, each costing its bytes and a
    separator, and what is left of the budget. The first message of a response is taken
    however large, so a reader always makes progress."""
    bounds: list[tuple[int, int]] = []
    for a, b in spans:
        if a < lo or b > hi:
            continue
        served = b - a + 1
        if budget < served and not (first and not bounds):
            break
        bounds.append((a, b))
        budget -= served
    return bounds, budget


def _range(begin: int, end: int) -> str:
    """An HTTP Range header for object bytes [begin, end)."""
    return f"bytes={begin}-{end - 1}"
