"""Reaching the streams from the driver and from the executors, one way per `Origin`: over HTTP
(the public API, any deployment) or directly from the DynamoDB table and S3 bucket (a bulk
job's path: no function in between, and ranges split at stored chunk boundaries).

Both hand back the store's own `ReadBatch` values (positions, and whole messages for JSON),
so that rows are made one way whatever the origin; a range that starts at a compacted stream's
snapshot token begins with a `SnapshotRead` (the snapshot's messages), then the history after
it. Executors build their clients when a partition is read: only the `Origin` is pickled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from functools import cache
from itertools import pairwise
from typing import Any, Protocol

import httpx

from durable_streams_aws.client import (
    DurableStream,
    Offset,
    OffsetGone,
    StreamGone,
    StreamNotFound,
    list_streams,
)
from durable_streams_aws.core.protocol.headers import (
    JSON_LAYOUT_LINES,
    STREAM_JSON_LAYOUT,
    is_json,
)
from durable_streams_aws.core.protocol.jsonmode import LINES_OPEN, split_messages
from durable_streams_aws.core.protocol.offsets import format_offset, parse_offset
from durable_streams_aws.core.storage import (
    ReadBatch,
    Snapshot,
    StreamInfo,
    bounded_read_budget,
)

from ._plan import BEGINNING, FIRST, Origin, StreamSlice, StreamState, position, rank
from ._responses import response_messages
from ._rows import LinedRead, Read, SnapshotRead
from ._transport import bulk_transport

# How much one direct read asks the store for (the store's reads are a DynamoDB query page
# plus ranged S3 GETs, so larger reads mean fewer calls).
DIRECT_READ_BYTES = 8 * 1024 * 1024


class Access(Protocol):
    def list(self, prefix: str) -> list[str]: ...

    def state(self, stream: str) -> StreamState | None: ...

    def read(self, piece: StreamSlice) -> Iterator[Read]: ...

    def split(self, piece: StreamSlice, every: int) -> list[StreamSlice]: ...


def access(origin: Origin) -> Access:
    return _storage_access(origin) if origin.direct else HttpAccess(origin)


_made_once = threading.Lock()  # what this process builds once is built by one thread


def _storage_access(origin: Origin) -> StorageAccess:
    """One store per process and origin: a worker reads partition after partition, each of
    several streams, and a store registers itself on the process's shared AWS clients (so one
    per read would live as long as they do). What it remembers of chunks and segments stays
    true (a committed item never changes), so it serves every read alike."""
    with _made_once:
        return _storages(origin)


@cache
def _storages(origin: Origin) -> StorageAccess:
    return StorageAccess(origin)


class HttpAccess:
    def __init__(self, origin: Origin) -> None:
        self.origin = origin

    @property
    def client(self) -> httpx.Client:
        # The process's, looked up each time: a streaming reader holding this is pickled.
        return _http_client()

    def list(self, prefix: str) -> list[str]:
        assert self.origin.url is not None
        found = list_streams(self.origin.url, prefix, token=self.origin.token, client=self.client)
        return sorted(found)

    def state(self, stream: str) -> StreamState | None:
        url = self.origin.stream_url(stream)
        with DurableStream(url, token=self.origin.token, client=self.client) as handle:
            try:
                info = handle.head()
            except (StreamNotFound, StreamGone):
                return None
        earliest = info.earliest_offset.token if info.earliest_offset is not None else None
        return StreamState(info.next_offset.token, info.content_type, earliest)

    def read(self, piece: StreamSlice) -> Iterator[Read]:
        json_stream = is_json(piece.content_type)
        # "-1" would read a stream compacted since planning from its snapshot, unannounced:
        # its first offset answers 410 then, which the read handles as any other loss.
        start_at = FIRST if piece.start == BEGINNING else piece.start
        layout = {STREAM_JSON_LAYOUT: JSON_LAYOUT_LINES} if json_stream else None
        url = self.origin.stream_url(piece.stream)
        stream = DurableStream(url, token=self.origin.token, headers=layout, client=self.client)
        with stream as handle:
            # The body is split here (`response_messages`), not parsed into values.
            reads = handle.read(Offset(start_at), until=Offset(piece.end), decode=False)
            for batch in reads:
                end = position(batch.next_offset.token)
                begun = parse_offset(batch.offset.token)
                if begun.snapshot:  # the snapshot, then the history after it
                    yield from _after_snapshot(batch.offset.token, batch.data, end, piece.stream)
                    continue
                start = begun.at
                if json_stream and batch.data.startswith(LINES_OPEN):
                    # Laid out a message per line (no other body opens so: stored messages
                    # never begin with whitespace); split where its rows are made.
                    yield LinedRead(start, end, batch.data)
                elif json_stream:
                    messages = tuple(response_messages(batch.data))
                    yield ReadBatch(start, end, messages=messages)
                else:
                    # A response ends between appends unless its offset says it was cut inside one.
                    inside = parse_offset(batch.next_offset.token).exact
                    yield ReadBatch(start, end, data=batch.data, ends=() if inside else (end,))

    def split(self, piece: StreamSlice, every: int) -> list[StreamSlice]:
        # Message boundaries are not known without reading; over HTTP a range is read whole.
        return [piece]


class StorageAccess:
    def __init__(self, origin: Origin) -> None:
        from durable_streams_aws.core.storage import DynamoStore
        from durable_streams_aws.core.storage.aws import AwsSettings

        assert origin.table is not None and origin.bucket is not None
        # An emulator takes any region; real AWS uses the one given, or the environment's.
        region = origin.region or ("us-east-1" if origin.endpoint else None)
        aws = AwsSettings(region, origin.endpoint, origin.endpoint, read_timeout=30.0)
        dynamodb, s3 = _clients(aws)
        self.store = DynamoStore(dynamodb, s3, origin.table, origin.bucket, read_only=True)

    def list(self, prefix: str) -> list[str]:
        paths: list[str] = []
        cursor: str | None = None
        while True:
            page = self.store.list_streams(prefix, cursor, page_items=1000)
            paths += page.paths
            if page.cursor is None:
                return sorted(paths)
            cursor = page.cursor

    def state(self, stream: str) -> StreamState | None:
        info = self.store.get(stream)
        if info is None or info.soft_deleted:
            return None
        return StreamState(format_offset(info.tail), info.content_type, _earliest(info))

    def read(self, piece: StreamSlice) -> Iterator[ReadBatch | SnapshotRead]:
        info = self.store.get(piece.stream)
        if info is None or info.soft_deleted:
            raise StreamNotFound(f"stream {piece.stream!r} was deleted while being read")
        end = position(piece.end)
        json_stream = is_json(info.content_type)
        if end > info.tail:
            raise StreamNotFound(f"stream {piece.stream!r} was re-created while being read")
        if piece.start != BEGINNING and parse_offset(piece.start).snapshot:
            snapshot = self._snapshot(info, piece.start)
            yield SnapshotRead(piece.start, self.store.snapshot_messages(snapshot))
            at = snapshot.at
        else:
            at = position(piece.start)
        while at < end:
            earliest = _earliest(info)  # a cut announced may take effect while this reads
            if earliest is not None and at < info.retained_now(time.time()).start:
                raise OffsetGone(
                    f"stream {piece.stream!r}: offset {format_offset(at)} is no longer kept "
                    f"(the earliest offset kept is {earliest})",
                    offset=Offset(format_offset(at)),
                    earliest_offset=Offset(earliest),
                )
            # Room for a JSON read's separators (with only `end - at`, each read stopped short
            # by a byte a message), where the read stops at `end` rather than spend that room
            # past it: not in what a fork inherited, read with no more than its own length.
            # A byte read's budget is the range itself (`end` may lie inside an append).
            bounded = info.ending_at(end) if json_stream else info
            room = json_stream and bounded.tail == end
            most = min(DIRECT_READ_BYTES, bounded_read_budget(end - at, room))
            batch = self.store.read(bounded, at, most).before(end)
            if batch.end == at:
                raise ValueError(f"{piece.stream}: no data between {at} and {end}")
            yield batch
            at = batch.end

    def _snapshot(self, info: StreamInfo, token: str) -> Snapshot:
        """The stream's snapshot named by `token`, as a read at it over HTTP finds it: gone
        once a later compaction replaced it (or a cut dropped what follows it)."""
        at = parse_offset(token).at
        retained = info.retained_now(time.time())
        if retained.snapshot is not None and retained.snapshot.at == at:
            return retained.snapshot
        if at > retained.start:
            raise ValueError(f"stream {info.path!r} has no snapshot at {token}")
        raise OffsetGone(
            f"stream {info.path!r}: offset {token} is no longer kept (the earliest offset "
            f"kept is {retained.earliest_offset})",
            offset=Offset(token),
            earliest_offset=Offset(retained.earliest_offset),
        )

    def split(self, piece: StreamSlice, every: int) -> list[StreamSlice]:
        info = self.store.get(piece.stream)
        if info is None:
            return [piece]
        # A range from a snapshot's token: its first part holds the snapshot.
        start, end = rank(piece.start)[0], position(piece.end)
        cuts, last = [], start
        for boundary in self.store.boundaries(info, start, end):
            if boundary - last >= every:
                cuts.append(boundary)
                last = boundary
        edges = [piece.start, *(format_offset(cut) for cut in cuts), piece.end]
        return [StreamSlice(piece.stream, lo, hi, piece.content_type) for lo, hi in pairwise(edges)]


def _http_client() -> httpx.Client:
    """One HTTP client per process (its connections pooled): a query's planning asks the
    streams' states, several at once, and a Spark worker reads partition after partition."""
    with _made_once:
        return _one_http_client()


@cache
def _one_http_client() -> httpx.Client:
    timeout = httpx.Timeout(60.0, connect=10.0)
    return httpx.Client(timeout=timeout, transport=bulk_transport())


@cache
def _clients(aws: Any) -> tuple[Any, Any]:
    """DynamoDB and S3 clients, built once per process and settings: a Spark worker reads
    partition after partition, and a pair takes 15 to 30 ms to build (clients hold no state
    of a read; their connections are pooled)."""
    from durable_streams_aws.core.storage.aws import make_clients

    return make_clients(aws)


def _after_snapshot(
    token: str, data: bytes, end: int, stream: str
) -> Iterator[ReadBatch | SnapshotRead]:
    """A response read at a compacted stream's snapshot token: the snapshot's messages, then
    the history from where it goes on up to `end`. Offsets count the history's bytes, so the
    messages that make up the last `end - at` bytes are the history; the rest, the snapshot."""
    at = parse_offset(token).at
    messages = tuple(split_messages(data, allow_empty_array=True))
    cut, history = len(messages), 0
    while history < end - at and cut > 0:
        cut -= 1
        history += len(messages[cut])
    if history != end - at:
        raise ValueError(f"{stream}: the history after snapshot {token} does not end at {end}")
    yield SnapshotRead(token, messages[:cut])
    if cut < len(messages):
        yield ReadBatch(at, end, messages=messages[cut:])


def _earliest(info: StreamInfo) -> str | None:
    """The earliest offset a read of the stream may start at, as the server's HEAD names it
    (None when retention has dropped nothing)."""
    retained = info.retained_now(time.time())
    return retained.earliest_offset if retained.dropped else None
