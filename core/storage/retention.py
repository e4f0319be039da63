"""Retention runs: dropping sealed history a stream's policy no longer keeps, and folding a
compacted stream's history into a snapshot. The sealer's sibling: it works on what the sealer
sealed, never on the hot tail.

Every stream with a policy is listed (`rq#` entries, written by its create). A run, for each:

  1. Records a cut that has taken effect (`rf`, `snap` on the stream item; `cut` removed).
  2. Retires what lies below the retained start, once the cut has been in effect for
     `retire_grace` seconds (longer than a read takes from its stream read to its last GET)
     and no fork reads the stream (a fork made before the cut may read below it; forks made
     after it start at or above it, which their create's condition ensures): the chunk and
     segment items below the start, and snapshot items no longer the stream's. Their objects
     are then named by nothing, and the collector removes them after its grace.
  3. Decides a new cut, when none is pending. Retention: the end of the last sealed segment
     the policy drops whole (`core.protocol.retention.retention_cut`). Compaction: the
     sealed position M, once the stream's sealed history has grown `min_bytes` past its
     snapshot; the snapshot and the history up to M are folded
     (`core.protocol.compaction`), the new snapshot written to S3 under a fresh key, and
     then, in one transaction, an item naming it and the cut, conditioned on the stream
     being as read. A crash before that transaction leaves an object nothing names (the
     collector's); after it, the cut is announced whole.

A cut is announced `delay` seconds ahead (`PendingCut`): until then reads go on as before and
responses that hold what it drops are cached no longer than until it takes effect; from then
on reads below it answer 410. Readers compute that from the stream item and the clock, so it
takes effect on time whether or not a run records it.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..protocol.compaction import StateFold
from ..protocol.headers import is_json
from ..protocol.offsets import MAX_POSITION
from ..protocol.retention import RetentionPolicy, SealedSpan, retention_cut, stored_policy
from . import _items as items
from ._snapshots import encode_snapshot, snapshot_key
from .aws import Conflict, call, delete_items, each_item
from .dynamo import DynamoStore
from .model import PendingCut, Retained, Snapshot, StoreUnavailable, StreamInfo

logger = logging.getLogger("dsaws.retention")

DEFAULT_RETIRE_GRACE_SECONDS = 60.0
DEFAULT_COMPACTION_MIN_BYTES = 1 << 20
# History read per call while folding.
_FOLD_READ_BYTES = 4 << 20
# A snapshot is served whole in one response: it must leave this much room for headers.
_RESPONSE_MARGIN = 1024


@dataclass
class RetentionReport:
    streams_examined: int = 0
    cuts_announced: int = 0
    cuts_recorded: int = 0
    bytes_dropped: int = 0  # history below the cuts announced
    streams_compacted: int = 0
    bytes_compacted: int = 0  # history folded into the snapshots announced
    snapshot_bytes: int = 0  # ... and the size of those snapshots
    compactions_refused: int = 0
    items_retired: int = 0
    races_lost: int = 0
    streams_failed: int = 0  # left for the next run; the error is logged

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class RetentionRun:
    def __init__(
        self,
        store: DynamoStore,
        *,
        delay: float = 0.0,
        retire_grace: float = DEFAULT_RETIRE_GRACE_SECONDS,
        compaction_min_bytes: int = DEFAULT_COMPACTION_MIN_BYTES,
        max_snapshot_bytes: int = 6_000_000,
        snapshot_fits: Callable[[tuple[bytes, ...]], bool] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`delay`: how long ahead a cut is announced (the longest a shared cache may keep a
        read); `max_snapshot_bytes`: about the largest response a read may be served, and
        `snapshot_fits` whether a snapshot's messages fit one as the host encodes it (a
        snapshot that would not is not made: the stream is refused compaction)."""
        self.store = store
        self.delay = delay
        self.retire_grace = retire_grace
        self.compaction_min_bytes = compaction_min_bytes
        self.max_snapshot_bytes = max_snapshot_bytes
        self.snapshot_fits = snapshot_fits
        self._clock = clock
        self.dynamodb = store.dynamodb
        self.s3 = store.s3
        self.table = store.table
        self.bucket = store.bucket

    def clock(self) -> float:
        return (self._clock or self.store.clock)()

    # ------------------------------------------------------------------ which streams

    def run(self) -> RetentionReport:
        report = RetentionReport()
        # From a shard of its own each run: one stream that keeps failing holds no other back.
        first = random.randrange(items.RETENTION_SHARDS)
        for entry in self._entries(first):
            path, incarnation = entry["path"]["S"], entry["inc"]["S"]
            try:
                self.run_stream(path, report, incarnation)
            except Exception:
                report.streams_failed += 1
                logger.exception("retention of %s failed; the next run tries again", path)
        return report

    def run_stream(
        self, path: str, report: RetentionReport, incarnation: str | None = None
    ) -> None:
        """One stream's run (`incarnation`: the one its entry lists; an entry whose stream is
        gone or made again without a policy is removed)."""
        info = self.store.snapshot(path)
        if info is None or (incarnation is not None and info.incarnation != incarnation):
            if incarnation is not None:
                self._drop_entry(path, incarnation)
            return
        policy = stored_policy(info.retention)
        if policy is None or info.soft_deleted or self.store.lifecycle_due(info):
            return
        report.streams_examined += 1
        now = self.clock()
        if info.pending_cut is not None and info.pending_cut.effective_at <= now:
            info = self._record(info, info.pending_cut, report)
            if info is None:
                return
        self._retire(info, now, report)
        if info.pending_cut is None:
            self._next_cut(info, policy, now, report)

    def _entries(self, first: int = 0) -> Iterator[dict[str, Any]]:
        for turn in range(items.RETENTION_SHARDS):
            shard = (first + turn) % items.RETENTION_SHARDS
            query = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": items.s(items.retention_partition(shard))},
            }
            yield from each_item(self.dynamodb.query, query)

    def _drop_entry(self, path: str, incarnation: str) -> None:
        with contextlib.suppress(Conflict):
            call(
                self.dynamodb.delete_item,
                TableName=self.table,
                Key=items.retention_entry_key(path),
                ConditionExpression="#inc = :inc",
                ExpressionAttributeNames={"#inc": "inc"},
                ExpressionAttributeValues={":inc": items.s(incarnation)},
            )

    # ------------------------------------------------------------------ 1. record

    def _record(
        self, info: StreamInfo, cut: PendingCut, report: RetentionReport
    ) -> StreamInfo | None:
        """The stream item with the effective cut recorded as its retained start."""
        retained = replace(cut.retained, since=cut.effective_at)
        try:
            call(
                self.dynamodb.update_item,
                TableName=self.table,
                Key=items.stream_key(info.path),
                UpdateExpression=_set_retained(retained),
                ConditionExpression="#inc = :inc AND #cut.#eff = :eff",
                ExpressionAttributeNames={**_RETAINED_NAMES, "#cut": "cut", "#eff": "eff"},
                ExpressionAttributeValues={
                    **_retained_values(retained),
                    ":inc": items.s(info.incarnation),
                    ":eff": items.n(cut.effective_at),
                },
            )
        except Conflict:
            report.races_lost += 1
            return None
        report.cuts_recorded += 1
        return replace(info, retained=retained, pending_cut=None)

    # ------------------------------------------------------------------ 2. retire

    def _retire(self, info: StreamInfo, now: float, report: RetentionReport) -> None:
        retained = info.retained
        if not retained.dropped or info.ref_count > 0 or now < retained.since + self.retire_grace:
            return
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": items.s(items.chunk_partition(info.incarnation)),
                ":lo": items.s(items.SNAPSHOT_SORT_PREFIX),
                ":hi": items.s(items.chunk_sort_key(retained.start)),
            },
            "ProjectionExpression": "pk, sk",
        }
        doomed = []
        for item in each_item(self.dynamodb.query, request):
            sort_key = item["sk"]["S"]
            if sort_key.startswith(items.SNAPSHOT_SORT_PREFIX):
                # Snapshots of history below the retained start were replaced; the current
                # one (at it) and one a pending cut announced (above it) stay.
                if int(sort_key.removeprefix(items.SNAPSHOT_SORT_PREFIX)) < retained.start:
                    doomed.append(item)
            elif sort_key.startswith("c#"):
                doomed.append(item)
        report.items_retired += delete_items(self.dynamodb, self.table, doomed, self.store.sleep)

    # ------------------------------------------------------------------ 3. decide

    def _next_cut(
        self, info: StreamInfo, policy: RetentionPolicy, now: float, report: RetentionReport
    ) -> None:
        if policy.compact:
            self._compact(info, now, report)
            return
        start = info.retained.start
        if info.sealed <= start:
            return  # nothing sealed past the retained start: nothing to drop
        cut = retention_cut(policy, list(self._sealed_spans(info, start)), info.tail, now)
        if cut <= start:
            return
        pending = PendingCut(Retained(cut), now + self.delay)
        if self._announce(info, pending, report):
            report.bytes_dropped += cut - start

    def _sealed_spans(self, info: StreamInfo, start: int) -> Iterator[SealedSpan]:
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": items.s(items.chunk_partition(info.incarnation)),
                ":lo": items.s(items.chunk_sort_key(start + 1)),
                ":hi": items.s(items.chunk_sort_key(info.sealed)),
            },
            "ProjectionExpression": "sk, #pg, #t",
            "ExpressionAttributeNames": {"#pg": "pg", "#t": "t"},
            "ConsistentRead": True,
        }
        for item in each_item(self.dynamodb.query, request):
            if "pg" in item:
                end = int(item["sk"]["S"].removeprefix("c#"))
                yield SealedSpan(end, float(item["t"]["N"]) if "t" in item else None)

    def _compact(self, info: StreamInfo, now: float, report: RetentionReport) -> None:
        retained = info.retained
        folded_to = info.sealed
        if (
            not is_json(info.content_type)
            or folded_to - retained.start < max(self.compaction_min_bytes, 1)
            or folded_to < info.compaction_retry_at
        ):
            return
        # Bounded: a state far past what one response can carry is refused as it grows.
        fold = StateFold(limit=4 * self.max_snapshot_bytes)
        history: list[bytes] = []
        if retained.snapshot is not None:
            history.extend(self.store.snapshot_messages(retained.snapshot))
        refusal = fold.fold(history) or fold.fold(self._history(info, retained.start, folded_to))
        if refusal is not None and refusal.too_large:
            self._refuse(info, str(refusal), folded_to + self.compaction_min_bytes, report)
            return
        if refusal is not None:
            # It is in the history for good: no later fold gets past it.
            self._refuse(info, str(refusal), MAX_POSITION, report)
            return
        messages = fold.snapshot()
        body = encode_snapshot(messages)
        size = sum(map(len, messages))
        fits = self.snapshot_fits(messages) if self.snapshot_fits is not None else True
        if not fits or size + len(messages) + _RESPONSE_MARGIN > self.max_snapshot_bytes:
            self._refuse(
                info,
                f"the state ({size} bytes) would not fit one response "
                f"({self.max_snapshot_bytes} bytes)",
                folded_to + max(self.compaction_min_bytes, 1),
                report,
            )
            return
        key = snapshot_key(info.incarnation)
        call(self.s3.put_object, Bucket=self.bucket, Key=key, Body=body)
        folded = folded_to - info.fork_position if info.forked_from else folded_to
        snapshot = Snapshot(folded_to, key, size, len(messages), folded)
        pending = PendingCut(Retained(folded_to, snapshot), now + self.delay)
        if self._announce(info, pending, report, snapshot):
            report.streams_compacted += 1
            report.bytes_compacted += folded_to - retained.start
            report.snapshot_bytes += size

    def _history(self, info: StreamInfo, start: int, end: int) -> Iterator[bytes]:
        """The messages stored in [start, end), read as a reader would (voids passed over)."""
        bounded = replace(info, tail=end)
        position = start
        while position < end:
            batch = self.store.read(bounded, position, _FOLD_READ_BYTES)
            if batch.end <= position:
                raise RuntimeError(f"{info.path}: no progress reading history at {position}")
            yield from batch.messages or ()
            position = batch.end

    def _refuse(
        self, info: StreamInfo, reason: str, retry_at: int, report: RetentionReport
    ) -> None:
        """Record why the stream is not compacted, and from which sealed position a run may
        try again (so that runs do not read its history again and again meanwhile)."""
        report.compactions_refused += 1
        logger.warning("%s is not compacted: %s", info.path, reason)
        with contextlib.suppress(Conflict):
            call(
                self.dynamodb.update_item,
                TableName=self.table,
                Key=items.stream_key(info.path),
                UpdateExpression="SET #cxr = :why, #cxp = :retry",
                ConditionExpression="#inc = :inc",
                ExpressionAttributeNames={"#cxr": "cxr", "#cxp": "cxp", "#inc": "inc"},
                ExpressionAttributeValues={
                    ":why": items.s(reason[:500]),
                    ":retry": items.n(retry_at),
                    ":inc": items.s(info.incarnation),
                },
            )

    def _announce(
        self,
        info: StreamInfo,
        pending: PendingCut,
        report: RetentionReport,
        snapshot: Snapshot | None = None,
    ) -> bool:
        """The cut, announced on the stream item if it is still as read (its incarnation,
        live, no cut pending, the same retained start); with a new snapshot, the item that
        names its object in the same transaction."""
        update: dict[str, Any] = {
            "TableName": self.table,
            "Key": items.stream_key(info.path),
            # The cut's start also stands alone, for the fork-create condition: the fast
            # condition forms of the embedded emulator take no nested paths.
            "UpdateExpression": "SET #cut = :cut, #cutrf = :cutrf REMOVE #cxr, #cxp",
            "ConditionExpression": "#inc = :inc AND attribute_not_exists(#del)"
            " AND attribute_not_exists(#cut) AND "
            + ("#rf = :rf" if info.retained.dropped else "attribute_not_exists(#rf)"),
            "ExpressionAttributeNames": {
                "#cut": "cut",
                "#cutrf": "cutrf",
                "#cxr": "cxr",
                "#cxp": "cxp",
                "#inc": "inc",
                "#del": "del",
                "#rf": "rf",
            },
            "ExpressionAttributeValues": {
                ":cut": items.encode_cut(pending),
                ":cutrf": items.n(pending.retained.start),
                ":inc": items.s(info.incarnation),
                **({":rf": items.n(info.retained.start)} if info.retained.dropped else {}),
            },
        }
        actions: list[dict[str, Any]] = [{"Update": update}]
        if snapshot is not None:
            actions.insert(0, {"Put": _snapshot_item(self.table, info.incarnation, snapshot)})
        try:
            self.store.write(actions)
        except Conflict:
            report.races_lost += 1
            return False
        report.cuts_announced += 1
        return True


def set_policy(store: DynamoStore, path: str, policy: RetentionPolicy) -> StreamInfo | None:
    """Give an existing stream a retention policy (streams made before their prefix had a
    default): the stream item's policy and its entry in the runs' list, in one transaction
    conditioned on the stream being the one read. None when there is no such live stream."""
    for _ in range(5):
        info = store.get(path)
        if info is None or info.soft_deleted:
            return None
        if policy.compact and not is_json(info.content_type):
            raise ValueError("compaction folds JSON streams only")
        changed = replace(info, retention=policy.header())
        update = {
            "TableName": store.table,
            "Key": items.stream_key(path),
            "UpdateExpression": "SET #ret = :ret",
            "ConditionExpression": "#inc = :inc AND attribute_not_exists(#del)",
            "ExpressionAttributeNames": {"#ret": "ret", "#inc": "inc", "#del": "del"},
            "ExpressionAttributeValues": {
                ":ret": items.s(policy.header()),
                ":inc": items.s(info.incarnation),
            },
        }
        try:
            store.write([{"Update": update}, items.retention_entry_put(store.table, changed)])
        except Conflict:
            continue
        return changed
    raise StoreUnavailable("the stream kept changing")


_RETAINED_NAMES = {"#rf": "rf", "#snap": "snap", "#rft": "rft", "#inc": "inc", "#cutrf": "cutrf"}


def _set_retained(retained: Retained) -> str:
    """Record a cut: its retained start and snapshot, in place of the cut pending."""
    if retained.snapshot is not None:
        return "SET #rf = :rf, #rft = :rft, #snap = :snap REMOVE #cut, #cutrf"
    return "SET #rf = :rf, #rft = :rft REMOVE #cut, #cutrf, #snap"


def _retained_values(retained: Retained) -> dict[str, Any]:
    values = {":rf": items.n(retained.start), ":rft": items.n(retained.since)}
    if retained.snapshot is not None:
        values[":snap"] = items.encode_snapshot(retained.snapshot)
    return values


def _snapshot_item(table: str, incarnation: str, snapshot: Snapshot) -> dict[str, Any]:
    """The item naming a snapshot's object in its incarnation's partition (so the collector
    keeps the object while the item is there)."""
    return {
        "TableName": table,
        "Item": {
            "pk": items.s(items.chunk_partition(incarnation)),
            "sk": items.s(items.snapshot_sort_key(snapshot.at)),
            "k": items.s(snapshot.key),
        },
    }
