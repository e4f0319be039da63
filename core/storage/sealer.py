"""The sealer: moves a stream's history out of DynamoDB into large S3 segment objects, without
changing a single offset.

Order of writes, for a run of items covering [start, end) of one incarnation:
  1. the segment object is written to S3 under a fresh key (`data/<inc>/seg-...`);
  2. the segment item is written at key `c#<end>`, replacing the run's last item, on the
     condition that this item is still the one that was read (a sealer that lost a race
     stops here, and its object is an orphan for the collector);
  3. the run's other items are deleted, each on the condition that it is still the item
     that was read (so a segment another sealer wrote meanwhile is never removed).

The reader's rule: items are keyed by their end; a read at a position takes, of the items
ending after it, the first one that starts at or before it (skipping replaced chunks whose
neighbours are already gone), and reads on from the position. It never matters whether that
item is a chunk or a segment covering the chunk and more: both hold the same bytes. So at
every step (and after a crash at any step) a stream reads the same:
  - after 1: the object is not named by any item; the collector removes it after its grace;
  - after 2: the segment and the older chunks overlap; reads are right either way, and the
    next run deletes the chunks it finds inside a segment;
  - during 3: the same, with fewer leftovers. Objects of chunks that were replaced become
    orphans for the collector; a reader that meets one just removed reads again (ObjectGone).
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from ..protocol.headers import is_json
from . import _items as items
from . import _segments as layout
from ._chunk_layout import Chunk, ObjectGone, data_prefix, decode_chunk
from ._seal_plan import SealPolicy, Stored, cut_here, plan
from .aws import Conflict, call, each_item
from .dynamo import DynamoStore
from .model import StoreUnavailable, StreamInfo

# Deletes in flight at once: each waits a network round trip on DynamoDB.
DELETE_THREADS = 8
# Plans made afresh after a lost race, before a stream is left for the next run.
_ATTEMPTS = 3
# Runs sealed in one go: each ends where the plan's bound or a void chunk does.
_MAX_RUNS = 64
# A range's claim is kept this long after it was written (see `Sealer._forget_claims`).
CLAIM_GRACE_SECONDS = 3600.0
logger = logging.getLogger("dsaws.sealer")


class InconsistentItem(Exception):
    """A stored item whose bytes do not add up to its range (its message lengths disagree):
    never sealed over, so nothing is lost; the stream is left for an operator."""


@dataclass
class SealReport:
    marks_found: int = 0  # streams commits marked for sealing, as this run found them
    oldest_mark_seconds: int = 0  # how long the oldest of those marks had waited
    streams_examined: int = 0
    streams_sealed: int = 0
    segments_written: int = 0
    bytes_sealed: int = 0
    items_deleted: int = 0
    races_lost: int = 0
    streams_failed: int = 0  # left (marked) for the next run; the error is logged

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Sealer:
    def __init__(
        self,
        store: DynamoStore,
        policy: SealPolicy | None = None,
        delete_threads: int = DELETE_THREADS,
        page_items: int | None = None,
    ) -> None:
        """`delete_threads`: 1 where requests are served one at a time anyway (the embedded
        emulator), whose lock parallel deletes would only crowd readers out of. `page_items`:
        the most chunk items one Query of the sealer reads (DynamoDB's 1 MB page otherwise);
        on the embedded emulator each call is a step that requests may have to wait for
        (`core.storage.lockstep`), so it is kept short there."""
        self.store = store
        self.delete_threads = delete_threads
        self.page_items = page_items
        self.policy = policy or SealPolicy()
        self.dynamodb = store.dynamodb
        self.s3 = store.s3
        self.table = store.table
        self.bucket = store.bucket

    # ------------------------------------------------------------------ which streams

    def run(self) -> SealReport:
        """Seal the streams that commits marked (a stream is marked when its tail passes a
        multiple of the store's `seal_mark_bytes`, and when it closes); each mark is cleared
        once its stream is sealed, unless a newer commit marked it again meanwhile."""
        report = SealReport()
        now = self.store.clock()
        for shard in range(items.SEAL_SHARDS):
            query = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": items.s(items.seal_partition(shard))},
            }
            for mark in each_item(self.dynamodb.query, query):
                report.marks_found += 1
                marked_at = items.mark_time(mark)
                if marked_at is not None:
                    waited = int(max(now - marked_at, 0))
                    report.oldest_mark_seconds = max(report.oldest_mark_seconds, waited)
                info = self.store.snapshot(mark["path"]["S"])
                if info is not None and info.incarnation == mark["inc"]["S"]:
                    report.streams_examined += 1
                    if not self._seal_isolated(info, report):
                        continue  # keep the mark: the next run tries again
                self._clear(mark)
        return report

    def run_all(self) -> SealReport:
        """Seal every stream with enough unsealed history, marked or not (a whole-table scan:
        for operators, and for streams written before sealing was deployed)."""
        report = SealReport()
        scan: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "sk = :meta AND (attribute_not_exists(#sd) OR #sd < #tail)",
            "ExpressionAttributeNames": {"#sd": "sd", "#tail": "tail"},
            "ExpressionAttributeValues": {":meta": items.s(items.META)},
        }
        for item in each_item(self.dynamodb.scan, scan):
            info = items.decode_stream(item["pk"]["S"][len(items.STREAM_PREFIX) :], item)
            if self.due(info):
                report.streams_examined += 1
                self._seal_isolated(info, report)
        return report

    def seal(self, *paths: str) -> SealReport:
        """Seal these streams now, as far as the policy allows (closed ones entirely)."""
        report = SealReport()
        for path in paths:
            info = self.store.snapshot(path)
            if info is not None:
                report.streams_examined += 1
                self._seal(info, report)
        return report

    def _seal_isolated(self, info: StreamInfo, report: SealReport) -> bool:
        """Seal one stream of a sweep; False when it is not done (a failure, logged and
        counted, or races lost attempt after attempt), so its mark stays for the next run.
        One stream that cannot be sealed must not hold up the others."""
        try:
            return self._seal(info, report)
        except (StoreUnavailable, ClientError, ObjectGone, InconsistentItem):
            logger.exception("sealing %s failed; the next run tries again", info.path)
            report.streams_failed += 1
            return False

    def due(self, info: StreamInfo) -> bool:
        unsealed = info.tail - max(info.sealed, info.fork_position)
        if info.closed:
            return unsealed > 0
        return unsealed > self.policy.hot_bytes

    def _clear(self, mark: dict[str, Any]) -> None:
        """Remove a mark, unless a commit renewed it since it was read."""
        self._delete_if(
            {"pk": mark["pk"], "sk": mark["sk"]},
            "#at = :at AND #inc = :inc",
            {"#at": "at", "#inc": "inc"},
            {":at": mark["at"], ":inc": mark["inc"]},
        )

    # ------------------------------------------------------------------ one stream

    def _seal(self, info: StreamInfo, report: SealReport) -> bool:
        """Seal one stream as far as the policy allows; False if another sealer kept
        changing its items (each lost race lists them again and plans afresh)."""
        if self.store.lifecycle_due(info):
            return True  # expired or released: the reaper and the collector take it from here
        if not info.settled:
            # Ranges pending or unpublished above the published tail (a stream several write):
            # seal up to where readable data ends, and publish it.
            info = self.store.settler.settle(info, publish=True)
        report.items_deleted += self._forget_claims(info)
        lost, sealed_any = 0, False
        for _ in range(_MAX_RUNS):
            decided = plan(
                list(self._stored(info.incarnation)),
                # Where retention left the stream's own data (items below go, `retention`).
                max(info.fork_position, info.retained.start),
                info.tail,
                info.closed,
                self.policy,
            )
            report.items_deleted += self._delete(info.incarnation, decided.redundant)
            sealed_to = decided.sealed_to
            if decided.run:
                sealed_to = self._seal_run(info, decided.run, report)
            if sealed_to > info.sealed:
                self._record_frontier(info, sealed_to)
                info = replace(info, sealed=sealed_to)
            if sealed_to < decided.sealed_to:
                lost += 1  # another sealer changed the items: plan afresh
                if lost >= _ATTEMPTS:
                    return False
                continue
            sealed_any = sealed_any or bool(decided.run)
            if not decided.more:  # a run that ended at a void chunk: seal on past it
                report.streams_sealed += 1 if sealed_any else 0
                return True
        return True

    def _stored(self, incarnation: str) -> Iterator[Stored]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :chunks)",
            "ExpressionAttributeValues": {
                ":pk": items.s(items.chunk_partition(incarnation)),
                ":chunks": items.s("c#"),
            },
            "ProjectionExpression": "sk, #st, #k, #pg, #v",
            "ExpressionAttributeNames": {"#st": "st", "#k": "k", "#pg": "pg", "#v": "v"},
            "ConsistentRead": True,
            **self._limit(),
        }
        for item in each_item(self.dynamodb.query, request):
            yield Stored(
                start=int(item["st"]["N"]),
                end=int(item["sk"]["S"].removeprefix("c#")),
                sealed="pg" in item,
                key=item["k"]["S"] if "k" in item else None,
                void=bool(item.get("v", {}).get("BOOL", False)),
            )

    def _seal_run(self, info: StreamInfo, run: tuple[Stored, ...], report: SealReport) -> int:
        """Seal a run item after item, cutting a segment wherever `cut_here` says and at the
        run's end; where sealed history ends afterwards (short of the run's end when an item
        changed under us: another sealer got there first)."""
        json_mode = is_json(info.content_type)
        pending: list[Stored] = []
        builder: layout.SegmentBuilder | None = None
        for stored, chunk in self._run_items(info.incarnation, run):
            if chunk is None:  # replaced since it was listed
                report.races_lost += 1
                return pending[0].start if pending else stored.start
            if builder is None:
                builder = layout.SegmentBuilder(stored.start, json_mode, self.policy.page_bytes)
            for piece in self.store.chunks.pieces(chunk, json_mode):
                builder.add(piece)
            if builder.position != stored.end:
                raise InconsistentItem(
                    f"{info.path}: the bytes stored up to {stored.end} end at {builder.position}"
                )
            pending.append(stored)
            last = stored is run[-1]
            if last or cut_here(builder.size, builder.open_page_fill, self.policy):
                if not self._record_segment(info, builder, pending):
                    report.races_lost += 1
                    return pending[0].start
                report.segments_written += 1
                report.bytes_sealed += builder.size
                report.items_deleted += self._delete(info.incarnation, pending[:-1])
                pending, builder = [], None
        return run[-1].end

    def _run_items(
        self, incarnation: str, run: tuple[Stored, ...]
    ) -> Iterator[tuple[Stored, Chunk | None]]:
        """Each item of the run with its stored form, read in order a page at a time (None
        for an item that is no longer what was listed)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": items.s(items.chunk_partition(incarnation)),
                ":lo": items.s(items.chunk_sort_key(run[0].start + 1)),
                ":hi": items.s(items.chunk_sort_key(run[-1].end)),
            },
            "ConsistentRead": True,
            **self._limit(),
        }
        wanted = iter(run)
        stored = next(wanted)
        for item in each_item(self.dynamodb.query, request):
            chunk = decode_chunk(item)
            if chunk.end < stored.end:
                continue  # covered by a segment: the plan deletes it
            if (chunk.start, chunk.end, chunk.sealed) != (stored.start, stored.end, stored.sealed):
                yield stored, None
                return
            yield stored, chunk
            following = next(wanted, None)
            if following is None:
                return
            stored = following
        yield stored, None  # the run's remaining items are gone

    def _limit(self) -> dict[str, int]:
        return {} if self.page_items is None else {"Limit": self.page_items}

    def _record_segment(
        self, info: StreamInfo, builder: layout.SegmentBuilder, replaced: list[Stored]
    ) -> bool:
        """Steps 1 and 2 for one segment; False when another writer changed the item it
        replaces."""
        start, end = builder.start, builder.position
        built = builder.finish()
        key = f"{data_prefix(info.incarnation)}seg-{start:016d}-{end:016d}-{uuid.uuid4().hex[:8]}"
        call(self.s3.put_object, Bucket=self.bucket, Key=key, Body=built.body)
        condition, names, values = _still(replaced[-1])
        return self._conditionally(
            self.dynamodb.put_item,
            Item={
                **items.chunk_key(info.incarnation, end),
                "st": items.n(start),
                "k": items.s(key),
                "pg": {"B": built.directory},
                # When: its data is at least this old, which retention by age goes by.
                "t": items.n(self.store.clock()),
            },
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def _forget_claims(self, info: StreamInfo) -> int:
        """Claims of reserved ranges (`core.storage._ranges`) are needed while a fill or a
        void of the range may still be tried. Once the range is below the published tail and
        its claim is older than `CLAIM_GRACE_SECONDS` (far longer than any write may take to
        land), neither can: the claim goes."""
        if info.published_ranges <= 0:
            return 0
        cutoff = self.store.clock() - CLAIM_GRACE_SECONDS
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
            "FilterExpression": "#at < :cutoff",
            "ExpressionAttributeNames": {"#at": "at"},
            "ExpressionAttributeValues": {
                ":pk": items.s(items.claim_partition(info.incarnation)),
                ":first": items.range_claim_key(info.incarnation, 0)["sk"],
                ":last": items.range_claim_key(info.incarnation, info.published_ranges)["sk"],
                ":cutoff": items.n(cutoff),
            },
            "ProjectionExpression": "pk, sk",
        }
        old = [{"pk": i["pk"], "sk": i["sk"]} for i in each_item(self.dynamodb.query, request)]
        for start in range(0, len(old), 25):
            batch = {self.table: [{"DeleteRequest": {"Key": k}} for k in old[start : start + 25]]}
            while batch:
                response = call(self.dynamodb.batch_write_item, RequestItems=batch)
                batch = response.get("UnprocessedItems") or {}
                if batch:
                    time.sleep(0.05)  # throttled: let the partition catch up
        return len(old)

    # ------------------------------------------------------------------ after sealing

    def _delete(self, incarnation: str, replaced: Iterable[Stored]) -> int:
        """Step 3: each item goes only if it is still the one that was read."""

        def delete(stored: Stored) -> int:
            return int(self._delete_if(items.chunk_key(incarnation, stored.end), *_still(stored)))

        replaced = list(replaced)
        if len(replaced) <= 1 or self.delete_threads <= 1:
            return sum(map(delete, replaced))
        with ThreadPoolExecutor(self.delete_threads) as pool:
            return sum(pool.map(delete, replaced))

    def _delete_if(
        self, key: dict[str, Any], condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> bool:
        """Delete an item if the condition holds; False when it did not (someone changed it)."""
        return self._conditionally(
            self.dynamodb.delete_item,
            Key=key,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def _conditionally(self, operation: Any, **params: Any) -> bool:
        """A conditional write to the table; False when its condition did not hold."""
        try:
            call(operation, TableName=self.table, **params)
        except Conflict:
            return False
        return True

    def _record_frontier(self, info: StreamInfo, sealed_to: int) -> None:
        """Where sealed history ends, kept on the stream item so a sweep can pass over
        streams with nothing to seal. Only a hint: sealing decides from the items."""
        with contextlib.suppress(Conflict):
            call(
                self.dynamodb.update_item,
                TableName=self.table,
                Key=items.stream_key(info.path),
                UpdateExpression="SET #sd = :to",
                ConditionExpression="#inc = :inc AND (attribute_not_exists(#sd) OR #sd < :to)",
                ExpressionAttributeNames={"#sd": "sd", "#inc": "inc"},
                ExpressionAttributeValues={
                    ":to": items.n(sealed_to),
                    ":inc": items.s(info.incarnation),
                },
            )


def _still(stored: Stored) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A condition that holds while the item at `stored`'s key is the one that was read: a
    chunk (which never has a page directory) starting where it did, or the same segment."""
    if stored.sealed:
        assert stored.key is not None
        return "#k = :k", {"#k": "k"}, {":k": items.s(stored.key)}
    return (
        "attribute_exists(pk) AND #st = :st AND attribute_not_exists(#pg)",
        {"#st": "st", "#pg": "pg"},
        {":st": items.n(stored.start)},
    )
