"""The garbage collector: removes data nobody can read any more. Safe at any time, alongside
traffic, and concurrently with itself.

Why it is safe: an incarnation is retired (a `gc#` marker written) only in the same transaction
that hard-deletes its stream item, and only when no fork references it; forks hold a reference
on their source until they are hard-deleted themselves, so no reader can reach a retired
incarnation's chunks. S3 objects that no chunk item names (uploads whose commit failed) are
removed only after a grace period far longer than any commit can take, and so are retired
incarnations (a fill of a range reserved before the delete may still land meanwhile).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from . import _items as items
from ._chunk_layout import DATA_ROOT, data_prefix, incarnation_of
from .aws import Conflict, call, delete_items, each_item
from .dynamo import DynamoStore

DEFAULT_ORPHAN_GRACE_SECONDS = 3600.0

logger = logging.getLogger(__name__)


class ObjectsNotDeleted(Exception):
    """S3 answered a DeleteObjects with errors for some of its keys (a 200 that lists them:
    a permission missing, a key it could not delete now). `deleted`: how many of the keys
    did go."""

    def __init__(self, errors: list[dict[str, str]], deleted: int) -> None:
        self.errors = errors
        self.deleted = deleted
        first = errors[0]
        super().__init__(
            f"{len(errors)} objects not deleted; the first, {first.get('Key')}: "
            f"{first.get('Code')} {first.get('Message', '')}".rstrip()
        )


@dataclass
class CollectionReport:
    streams_reaped: int = 0  # expired or soft-deleted-and-unreferenced streams finished
    incarnations_removed: int = 0
    items_deleted: int = 0
    objects_deleted: int = 0
    orphans_deleted: int = 0
    # Objects S3 refused to delete: their incarnation (or orphans) stays for the next run.
    objects_failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Collector:
    def __init__(
        self,
        store: DynamoStore,
        orphan_grace_seconds: float = DEFAULT_ORPHAN_GRACE_SECONDS,
        clock: Callable[[], float] = time.time,
        page_items: int | None = None,
    ) -> None:
        """`page_items`: the most items one Scan or Query of the collector reads (DynamoDB's
        1 MB page otherwise); on the embedded emulator each call is a step that requests may
        have to wait for (`core.storage.lockstep`), so it is kept short there."""
        self.store = store
        self.page_items = page_items
        self.dynamodb = store.dynamodb
        self.s3 = store.s3
        self.table = store.table
        self.bucket = store.bucket
        self.orphan_grace_seconds = orphan_grace_seconds
        self.clock = clock

    def run(self) -> CollectionReport:
        report = CollectionReport()
        report.streams_reaped = self._finish_lifecycles()
        retired_before = self.clock() - self.orphan_grace_seconds
        for incarnation, path, retired_at in self._retired():
            # A reserved range's fill may still land for a moment after its stream was
            # deleted (it is not conditioned on the stream): the incarnation goes once the
            # grace has passed, and whatever such a fill wrote goes with it.
            if retired_at <= retired_before:
                try:
                    self._remove_incarnation(incarnation, path, report)
                except ObjectsNotDeleted as refused:
                    self._note_refusal(refused, f"incarnation {incarnation} of {path}", report)
        self._remove_orphans(report)
        return report

    @staticmethod
    def _note_refusal(refused: ObjectsNotDeleted, what: str, report: CollectionReport) -> None:
        """Objects S3 would not delete: counted and logged, the rest of the run goes on, and
        what names them stays, so the next run tries again."""
        report.objects_failed += len(refused.errors)
        logger.error("collecting %s: %s; the next run tries again", what, refused)

    # -------------------------------------------------------------- stream lifecycles

    def _finish_lifecycles(self) -> int:
        """Expired streams nobody touched, and cascades a crash interrupted."""
        finished = 0
        scan: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "sk = :meta AND (attribute_exists(#del) OR attribute_exists(#ttl)"
            " OR attribute_exists(#exp))",
            "ExpressionAttributeNames": {"#del": "del", "#ttl": "ttl", "#exp": "exp"},
            "ExpressionAttributeValues": {":meta": items.s(items.META)},
            **self._limit(),
        }
        for item in each_item(self.dynamodb.scan, scan):
            path = item["pk"]["S"][2:]
            if self.store.finish_lifecycle(items.decode_stream(path, item)):
                finished += 1
        return finished

    # -------------------------------------------------------------- retired incarnations

    def _retired(self) -> Iterator[tuple[str, str, float]]:
        for shard in range(items.RETIRE_SHARDS):
            query = {
                "TableName": self.table,
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": items.s(items.retire_partition(shard))},
            }
            for item in each_item(self.dynamodb.query, query):
                yield item["sk"]["S"], item["path"]["S"], float(item.get("at", {"N": "0"})["N"])

    def _remove_incarnation(self, incarnation: str, path: str, report: CollectionReport) -> None:
        chunk_keys = [
            {"pk": item["pk"], "sk": item["sk"]}
            for partition in (
                items.chunk_partition(incarnation),
                items.claim_partition(incarnation),
            )
            for item in each_item(
                self.dynamodb.query,
                {
                    "TableName": self.table,
                    "KeyConditionExpression": "pk = :pk",
                    "ExpressionAttributeValues": {":pk": items.s(partition)},
                    "ProjectionExpression": "pk, sk",
                    **self._limit(),
                },
            )
        ]
        producer_keys = [
            {"pk": item["pk"], "sk": item["sk"]}
            for item in each_item(
                self.dynamodb.query,
                {
                    "TableName": self.table,
                    "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
                    "FilterExpression": "#inc = :inc",
                    "ExpressionAttributeNames": {"#inc": "inc"},
                    "ExpressionAttributeValues": {
                        ":pk": items.s(f"s#{path}"),
                        ":p": items.s("p#"),
                        ":inc": items.s(incarnation),
                    },
                },
            )
        ]
        # Objects first, then the items that name them, then the marker: an interrupted run
        # leaves the marker, and the next run finishes the job.
        keys = [o["Key"] for o in self._objects(data_prefix(incarnation))]
        try:
            report.objects_deleted += self._delete_objects(keys)
        except ObjectsNotDeleted as refused:
            report.objects_deleted += refused.deleted
            raise  # the items that name the objects, and the marker, stay
        report.items_deleted += self._delete_items(chunk_keys)
        report.items_deleted += self._delete_producers(producer_keys, incarnation)
        self._delete_items([items.retire_key(incarnation)])
        report.incarnations_removed += 1

    # -------------------------------------------------------------- orphaned uploads

    def _remove_orphans(self, report: CollectionReport) -> None:
        cutoff = self.clock() - self.orphan_grace_seconds
        by_incarnation: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for obj in self._objects(DATA_ROOT):
            incarnation = incarnation_of(obj["Key"])
            by_incarnation[incarnation].append(obj)
        for incarnation, objects in by_incarnation.items():
            old = [o for o in objects if o["LastModified"].timestamp() < cutoff]
            if not old:
                continue
            named = self._named_objects(incarnation)
            orphans = [o["Key"] for o in old if o["Key"] not in named]
            try:
                report.orphans_deleted += self._delete_objects(orphans)
            except ObjectsNotDeleted as refused:
                report.orphans_deleted += refused.deleted
                self._note_refusal(refused, f"orphans of incarnation {incarnation}", report)

    def _named_objects(self, incarnation: str) -> set[str]:
        query = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": items.s(items.chunk_partition(incarnation))},
            **self._limit(),
        }
        named: set[str] = set()
        for item in each_item(self.dynamodb.query, query):
            for attribute in ("k", "mk"):
                if attribute in item:
                    named.add(item[attribute]["S"])
        return named

    # -------------------------------------------------------------- plumbing

    def _limit(self) -> dict[str, int]:
        return {} if self.page_items is None else {"Limit": self.page_items}

    def _objects(self, prefix: str) -> Iterator[dict[str, Any]]:
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            yield from page.get("Contents", [])

    def _delete_objects(self, keys: list[str]) -> int:
        """Delete the keys, 1,000 to a call; S3 answers 200 even when it refused some of them
        and lists those in `Errors` (Quiet mode lists nothing else)."""
        errors: list[dict[str, str]] = []
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            response = self.s3.delete_objects(
                Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
            )
            errors += response.get("Errors", [])
        if errors:
            raise ObjectsNotDeleted(errors, deleted=len(keys) - len(errors))
        return len(keys)

    def _delete_producers(self, keys: list[dict[str, Any]], incarnation: str) -> int:
        """Producer items are keyed by path, not incarnation: a producer of the stream now at
        that path may have rewritten one since it was listed. Each goes only if it still
        belongs to the retired incarnation, or a retry of an acknowledged append would be
        accepted again."""
        deleted = 0
        for key in keys:
            with contextlib.suppress(Conflict):
                call(
                    self.dynamodb.delete_item,
                    TableName=self.table,
                    Key=key,
                    ConditionExpression="#inc = :inc",
                    ExpressionAttributeNames={"#inc": "inc"},
                    ExpressionAttributeValues={":inc": items.s(incarnation)},
                )
                deleted += 1
        return deleted

    def _delete_items(self, keys: list[dict[str, Any]]) -> int:
        return delete_items(self.dynamodb, self.table, keys, self.store.sleep)
