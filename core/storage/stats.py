"""`dsaws stats`: what a deployment holds, read from its table and bucket.

One pass over the table (a Scan, page by page, with a progress callback for large tables)
classifies each item by its key (`_items` describes the layout), and one listing of the
bucket's data prefix counts the objects. Figures are a snapshot: writers may move on while the
scan runs, and a stream deleted meanwhile may be counted by halves.

Retention (`core.storage.retention`) is read off the stream items: their policy, where their
retained data starts at the time of the scan (a cut counts once it is effective, recorded or
not), the snapshot a compaction left, the cut announced and why compaction was refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from ..protocol.retention import stored_policy
from . import _items as items
from ._chunk_layout import DATA_ROOT, decode_chunk
from .aws import call, pages
from .model import StreamInfo

Progress = Callable[[int], None]
# How many of the streams refused compaction the report names (all are counted).
REFUSALS_LISTED = 20


@dataclass
class StoreStats:
    streams: int = 0
    streams_closed: int = 0
    streams_soft_deleted: int = 0  # deleted, kept for the forks that read them
    stream_bytes: int = 0  # the live streams' tails: what readers can read
    producers: int = 0
    chunk_items: int = 0
    bytes_inline: int = 0  # stream data held in DynamoDB items
    bytes_unsealed_in_s3: int = 0  # large appends stored as objects of their own
    bytes_sealed: int = 0  # history moved into S3 segments by the sealer
    marks_waiting: int = 0  # streams the sealer has yet to seal
    incarnations_to_collect: int = 0  # deleted or expired data the collector has yet to remove
    subscriptions: int = 0
    subscription_links: int = 0
    links_behind: int = 0  # linked streams with data past their subscription's ack
    subscription_backlog_bytes: int = 0
    streams_with_retention: int = 0  # a max-age and/or max-bytes policy
    streams_with_compaction: int = 0  # the compact policy
    bytes_dropped_by_retention: int = 0  # below the retained start of streams without snapshot
    snapshots: int = 0  # the streams' current snapshots (a fork's, its source's)
    bytes_compacted: int = 0  # the history they stand for
    snapshot_bytes: int = 0  # ... and their own size
    cuts_pending: int = 0  # announced and not yet recorded by a retention run
    streams_refused_compaction: int = 0
    compaction_refused: list[dict[str, str]] = field(default_factory=list)  # the first few
    table_items: int = 0
    s3_objects: int = 0
    s3_bytes: int = 0

    @property
    def sealed_share(self) -> float:
        """The share of stored stream data that the sealer has moved into segments."""
        stored = self.bytes_inline + self.bytes_unsealed_in_s3 + self.bytes_sealed
        return self.bytes_sealed / stored if stored else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sealed_share": round(self.sealed_share, 4)}


@dataclass
class _Tails:
    """What the links' backlog is measured against: each stream's tail and incarnation; and
    the snapshots counted (a fork reads its source's: one object, counted once)."""

    by_path: dict[str, tuple[str, int]] = field(default_factory=dict)
    links: list[tuple[str, str | None, int]] = field(default_factory=list)
    snapshots: set[str] = field(default_factory=set)


def gather_stats(store: Any, progress: Progress | None = None) -> StoreStats:
    """Figures for the store's table and bucket (`store`: a `DynamoStore`)."""
    stats = StoreStats()
    tails = _Tails()
    now = store.clock()
    for item in _scan(store.dynamodb, store.table, progress):
        stats.table_items += 1
        _count(stats, tails, item, now)
    for path, incarnation, acked in tails.links:
        stream = tails.by_path.get(path)
        if stream is None:
            continue
        current, tail = stream
        behind = tail - acked if incarnation == current else tail
        if behind > 0:
            stats.links_behind += 1
            stats.subscription_backlog_bytes += behind
    for size in _objects(store.s3, store.bucket, progress, stats.table_items):
        stats.s3_objects += 1
        stats.s3_bytes += size
    return stats


def _scan(dynamodb: Any, table: str, progress: Progress | None) -> Iterator[items.Item]:
    seen = 0
    for page in pages(dynamodb.scan, {"TableName": table}):
        yield from page
        seen += len(page)
        if progress is not None:
            progress(seen)


def _objects(s3: Any, bucket: str, progress: Progress | None, scanned: int) -> Iterator[int]:
    """The size of each object under the data prefix (`progress` told before each page, with
    the table's item count: it may stop the listing too)."""
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": DATA_ROOT}
    while True:
        if progress is not None:
            progress(scanned)
        response = call(s3.list_objects_v2, **request)
        for entry in response.get("Contents", []):
            yield int(entry["Size"])
        if not response.get("IsTruncated"):
            return
        request["ContinuationToken"] = response["NextContinuationToken"]


def _count(stats: StoreStats, tails: _Tails, item: items.Item, now: float) -> None:
    partition, sort = item["pk"]["S"], item["sk"]["S"]
    if partition.startswith(items.STREAM_PREFIX):
        if sort == items.META:
            _count_stream(stats, tails, partition[len(items.STREAM_PREFIX) :], item, now)
        else:
            stats.producers += 1
    elif partition.startswith(items.CHUNK_PREFIX):
        # The same partition names a compaction's snapshots (`a#<at>`): counted from the
        # stream items, which say which snapshot is the stream's.
        if not sort.startswith(items.SNAPSHOT_SORT_PREFIX):
            _count_chunk(stats, item)
    elif partition.startswith(items.SEAL_PREFIX):
        stats.marks_waiting += 1
    elif partition.startswith(items.RETIRE_PREFIX):
        stats.incarnations_to_collect += 1
    elif partition == items.SUBSCRIPTION_PARTITION:
        if not item.get("del", {}).get("BOOL", False):
            stats.subscriptions += 1
    elif partition.startswith(items.SUBSCRIPTION_LINK_PREFIX):
        stats.subscription_links += 1
        incarnation = item.get("linc", {}).get("S") or None
        tails.links.append((sort, incarnation, int(item.get("acked", {}).get("N", "0"))))


def _count_stream(
    stats: StoreStats, tails: _Tails, path: str, item: items.Item, now: float
) -> None:
    info = items.decode_stream(path, item)
    if info.soft_deleted:
        stats.streams_soft_deleted += 1
        return
    stats.streams += 1
    stats.streams_closed += info.closed
    stats.stream_bytes += info.tail
    tails.by_path[path] = (info.incarnation, info.tail)
    _count_retention(stats, tails, info, now)


def _count_retention(stats: StoreStats, tails: _Tails, info: StreamInfo, now: float) -> None:
    policy = stored_policy(info.retention)
    if policy is not None:
        if policy.compact:
            stats.streams_with_compaction += 1
        else:
            stats.streams_with_retention += 1
    # By what the stream holds rather than by its policy: a fork keeps its source's snapshot
    # (and retained start) whatever policy it has of its own.
    retained = info.retained_now(now)
    if retained.snapshot is None:
        stats.bytes_dropped_by_retention += retained.start
    elif retained.snapshot.key not in tails.snapshots:
        tails.snapshots.add(retained.snapshot.key)
        stats.snapshots += 1
        stats.bytes_compacted += retained.snapshot.folded
        stats.snapshot_bytes += retained.snapshot.size
    if info.pending_cut is not None:
        stats.cuts_pending += 1
    if info.compaction_refused is not None:
        stats.streams_refused_compaction += 1
        if len(stats.compaction_refused) < REFUSALS_LISTED:
            entry = {"path": info.path, "reason": info.compaction_refused}
            stats.compaction_refused.append(entry)


def _count_chunk(stats: StoreStats, item: items.Item) -> None:
    stats.chunk_items += 1
    chunk = decode_chunk(item)
    if chunk.sealed:
        stats.bytes_sealed += chunk.end - chunk.start
    elif chunk.inline is not None:
        stats.bytes_inline += len(chunk.inline)
    elif chunk.s3_key is not None:
        stats.bytes_unsealed_in_s3 += chunk.end - chunk.start
