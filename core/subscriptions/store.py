"""Subscriptions in the streams' DynamoDB table.

  sub#      / <id>    a subscription: its configuration, wake, lease and retry state, and a
                      version that every write checks and bumps (the optimistic fence)
  sl#<inc>  / <path>  one linked stream of incarnation <inc> of a subscription: link kinds
                      and the acked position (with the stream incarnation it refers to), and
                      its last move up to the stream's earliest retained offset (`skip`)

Every subscription sits in one partition, so the append path and the delivery worker read
them all with one Query.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, fields, replace
from typing import Any

from ..storage import table as items
from ..storage.aws import Conflict, call, each_item
from ..storage.model import StreamInfo
from .model import (
    Ack,
    Delivery,
    Link,
    Skip,
    StreamTail,
    Subscription,
    SubscriptionConfig,
    Wake,
    WakeStream,
)

REGISTRY = items.SUBSCRIPTION_PARTITION
LINK_PREFIX = items.SUBSCRIPTION_LINK_PREFIX
_BATCH_GET = 100
_TRANSACTION_ITEMS = 100


def _link_partition(subscription: Subscription) -> str:
    return LINK_PREFIX + subscription.incarnation


def _link_key(subscription: Subscription, path: str) -> items.Item:
    return {"pk": items.s(_link_partition(subscription)), "sk": items.s(path)}


class SubscriptionStore:
    def __init__(
        self,
        dynamodb: Any,
        table: str,
        settle: Callable[[StreamInfo], StreamInfo] | None = None,
    ) -> None:
        """`settle`: where a stream's readable data ends when ranges are pending above its
        published tail (`DynamoStore.settler.settle`); without it, the published tail."""
        self.dynamodb = dynamodb
        self.table = table
        self.settle = settle

    # ------------------------------------------------------------ subscriptions

    def get(self, subscription_id: str) -> Subscription | None:
        response = call(
            self.dynamodb.get_item,
            TableName=self.table,
            Key={"pk": items.s(REGISTRY), "sk": items.s(subscription_id)},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return decode_subscription(item) if item else None

    def all(self) -> list[Subscription]:
        """Every subscription, tombstones included, in one consistent Query (paged)."""
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": items.s(REGISTRY)},
            "ConsistentRead": True,
        }
        return [decode_subscription(item) for item in each_item(self.dynamodb.query, request)]

    def insert(self, subscription: Subscription, tombstone: Subscription | None) -> None:
        """Write a new subscription where none lives, or over the `tombstone` read (as it was
        read: a racing re-creation or a late write of the removed one loses); Conflict
        otherwise."""
        if tombstone is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "#del = :yes AND #ver = :read",
                "ExpressionAttributeNames": {"#del": "del", "#ver": "ver"},
                "ExpressionAttributeValues": {
                    ":yes": {"BOOL": True},
                    ":read": items.n(tombstone.version),
                },
            }
        call(
            self.dynamodb.put_item,
            TableName=self.table,
            Item=encode_subscription(subscription),
            **condition,
        )

    def mark_backfilled(self, subscription: Subscription) -> None:
        """Record that the creation's backfill finished (a re-confirming PUT redoes it
        otherwise). A hint: a later write of an older copy may clear it, which costs only a
        backfill again (links are written only where missing)."""
        call(
            self.dynamodb.update_item,
            TableName=self.table,
            Key={"pk": items.s(REGISTRY), "sk": items.s(subscription.id)},
            UpdateExpression="SET #bf = :yes",
            ConditionExpression="#inc = :inc",
            ExpressionAttributeNames={"#bf": "bf", "#inc": "inc"},
            ExpressionAttributeValues={
                ":yes": {"BOOL": True},
                ":inc": items.s(subscription.incarnation),
            },
        )

    def replace(self, subscription: Subscription, read_version: int) -> Subscription:
        """Write `subscription` over the version read; Conflict if anyone wrote since."""
        written = _bumped(subscription, read_version)
        call(self.dynamodb.put_item, **self._put_over(written, read_version))
        return written

    def replace_with_acks(
        self,
        subscription: Subscription,
        read_version: int,
        acks: Sequence[Ack],
        incarnations: Mapping[str, str | None],
    ) -> Subscription:
        """Move link cursors and write the subscription in one transaction, fenced on the
        version read: an ack for a wake that is no longer current changes nothing, and a
        cursor only ever moves forward (within its stream incarnation); Conflict otherwise."""
        if len(acks) >= _TRANSACTION_ITEMS:
            raise ValueError("too many acks for one transaction")
        written = _bumped(subscription, read_version)
        actions: list[dict[str, Any]] = [{"Put": self._put_over(written, read_version)}]
        for ack in acks:
            actions.append({"Update": self._ack_update(subscription, ack, incarnations)})
        call(self.dynamodb.transact_write_items, TransactItems=actions)
        return written

    def _ack_update(
        self, subscription: Subscription, ack: Ack, incarnations: Mapping[str, str | None]
    ) -> dict[str, Any]:
        """One cursor's move, only forward: past the acked position, or from a snapshot's
        token to its position's own (the snapshot was read); with the skip it records, for a
        move up to the earliest retained offset."""
        names = {"#acked": "acked", "#linc": "linc", "#ackx": "ackx", "#acks": "acks"}
        values: dict[str, Any] = {
            ":at": items.n(ack.position),
            ":inc": items.s(incarnations.get(ack.path) or ""),
            ":exact": {"BOOL": ack.exact},
            ":snap": {"BOOL": ack.snapshot},
        }
        forward = "attribute_not_exists(#acked) OR #acked < :at OR #linc <> :inc"
        if not ack.snapshot:
            forward += " OR (#acked = :at AND #acks = :snapped)"
            values[":snapped"] = {"BOOL": True}
        expression = "SET #acked = :at, #linc = :inc, #ackx = :exact, #acks = :snap"
        if ack.skipped is not None:
            expression += ", #skip = :skip"
            names["#skip"] = "skip"
            values[":skip"] = encode_skip(ack.skipped)
        return {
            "TableName": self.table,
            "Key": _link_key(subscription, ack.path),
            "UpdateExpression": expression,
            "ConditionExpression": f"attribute_exists(pk) AND ({forward})",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def _put_over(self, subscription: Subscription, read_version: int) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Item": encode_subscription(subscription),
            "ConditionExpression": "#ver = :read",
            "ExpressionAttributeNames": {"#ver": "ver"},
            "ExpressionAttributeValues": {":read": items.n(read_version)},
        }

    # ------------------------------------------------------------ links

    def links(self, subscription: Subscription) -> list[Link]:
        request = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": items.s(_link_partition(subscription))},
            "ConsistentRead": True,
        }
        return [decode_link(item) for item in each_item(self.dynamodb.query, request)]

    def link(
        self,
        subscription: Subscription,
        path: str,
        *,
        glob: bool,
        explicit: bool,
        at: StreamTail | None,
    ) -> None:
        """Mark `path` linked by the pattern (`glob`) and/or explicitly; a mark not given is
        left as it was. A new link starts at `at` (None: the stream's beginning, whatever
        incarnation it is in); an existing link keeps its cursor."""
        names = {"#glob": "glob", "#expl": "expl", "#acked": "acked"}
        values: dict[str, Any] = {":yes": {"BOOL": True}, ":at": items.n(at.tail if at else 0)}
        marks = [
            f"{name} = :yes" if given else f"{name} = if_not_exists({name}, :no)"
            for name, given in (("#glob", glob), ("#expl", explicit))
        ]
        if not (glob and explicit):  # DynamoDB refuses a value the expression does not use
            values[":no"] = {"BOOL": False}
        expression = f"SET {', '.join(marks)}, #acked = if_not_exists(#acked, :at)"
        if at is not None and at.incarnation is not None:
            expression += ", #linc = if_not_exists(#linc, :inc)"
            names["#linc"] = "linc"
            values[":inc"] = items.s(at.incarnation)
        call(
            self.dynamodb.update_item,
            TableName=self.table,
            Key=_link_key(subscription, path),
            UpdateExpression=expression,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    def unlink_explicit(self, subscription: Subscription, path: str, *, keep: bool) -> None:
        """Drop the explicit mark of a link; the link goes unless the pattern still holds it
        (`keep`)."""
        key = _link_key(subscription, path)
        if keep:
            call(
                self.dynamodb.update_item,
                TableName=self.table,
                Key=key,
                UpdateExpression="SET #expl = :no, #glob = :yes",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#expl": "expl", "#glob": "glob"},
                ExpressionAttributeValues={":no": {"BOOL": False}, ":yes": {"BOOL": True}},
            )
        else:
            call(self.dynamodb.delete_item, TableName=self.table, Key=key)

    def drop_links(self, subscription: Subscription) -> None:
        """Delete a removed subscription's links (its tombstone already ignores them)."""
        keys = [_link_key(subscription, link.path) for link in self.links(subscription)]
        for start in range(0, len(keys), 25):
            batch = [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]
            pending: dict[str, Any] = {self.table: batch}
            while pending:
                response = call(self.dynamodb.batch_write_item, RequestItems=pending)
                pending = response.get("UnprocessedItems") or {}
                if pending:
                    time.sleep(0.05)

    # ------------------------------------------------------------ stream tails

    def tails(self, paths: Iterable[str]) -> dict[str, StreamTail]:
        """The current incarnation and tail of each stream (absent, expired or deleted
        streams: not in the answer), read consistently in batches."""
        found: dict[str, StreamTail] = {}
        wanted = sorted(set(paths))
        for start in range(0, len(wanted), _BATCH_GET):
            keys = [items.stream_key(path) for path in wanted[start : start + _BATCH_GET]]
            for item in self._batch_get(keys):
                path = item["pk"]["S"].removeprefix(items.STREAM_PREFIX)
                info = items.decode_stream(path, item)
                now = time.time()
                if not info.soft_deleted and not info.is_expired(now):
                    if not info.settled and self.settle is not None:
                        info = self.settle(info)
                    found[path] = StreamTail(info.incarnation, info.tail, info.retained_now(now))
        return found

    def _batch_get(self, keys: list[items.Item]) -> Iterator[items.Item]:
        request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            response = call(self.dynamodb.batch_get_item, RequestItems=request)
            yield from response.get("Responses", {}).get(self.table, [])
            request = response.get("UnprocessedKeys") or {}
            if request:
                time.sleep(0.05)


def _bumped(subscription: Subscription, read_version: int) -> Subscription:
    return replace(subscription, version=read_version + 1)


# ---------------------------------------------------------------- item encoding


def encode_subscription(subscription: Subscription) -> items.Item:
    config = subscription.config
    item: items.Item = {
        "pk": items.s(REGISTRY),
        "sk": items.s(subscription.id),
        "inc": items.s(subscription.incarnation),
        # UTF-8 as it is (not \u escapes, which triple a path's size); the explicit paths are
        # kept once, in `expl`, not in the configuration as well.
        "cfg": items.s(json.dumps(_config_fields(config), sort_keys=True, ensure_ascii=False)),
        "hash": items.s(subscription.config_hash),
        "ctime": items.n(subscription.created_at),
        "ver": items.n(subscription.version),
        "gen": items.n(subscription.generation),
        "expl": {"L": [items.s(path) for path in sorted(subscription.explicit)]},
        "del": {"BOOL": subscription.deleted},
        "fails": items.n(subscription.failed_attempts),
        "next": items.n(subscription.next_attempt_at),
        "root": items.s(subscription.public_root),
        "bf": {"BOOL": subscription.backfilled},
        "ldrop": {"BOOL": subscription.links_dropped},
        "dtime": items.n(subscription.deleted_at),
    }
    if subscription.wake is not None:
        item["wake"] = items.s(json.dumps(asdict(subscription.wake), ensure_ascii=False))
    return item


def _config_fields(config: SubscriptionConfig) -> dict[str, Any]:
    fields = asdict(config)
    fields["delivery"] = config.delivery.value
    del fields["streams"]
    return fields


def decode_subscription(item: items.Item) -> Subscription:
    fields = json.loads(item["cfg"]["S"])
    config = SubscriptionConfig(
        delivery=Delivery(fields["delivery"]),
        pattern=fields["pattern"],
        streams=(),  # in `expl`, with the paths added since
        webhook_url=fields["webhook_url"],
        wake_stream=fields["wake_stream"],
        lease_ttl_ms=fields["lease_ttl_ms"],
        description=fields["description"],
    )
    wake = None
    if "wake" in item:
        raw = json.loads(item["wake"]["S"])
        raw["streams"] = tuple(WakeStream(**_known(stream)) for stream in raw["streams"])
        wake = Wake(**raw)
    return Subscription(
        id=item["sk"]["S"],
        incarnation=item["inc"]["S"],
        config=config,
        config_hash=item["hash"]["S"],
        created_at=float(item["ctime"]["N"]),
        version=int(item["ver"]["N"]),
        generation=int(item["gen"]["N"]),
        wake=wake,
        explicit=frozenset(value["S"] for value in item.get("expl", {}).get("L", [])),
        deleted=bool(item.get("del", {}).get("BOOL", False)),
        failed_attempts=int(item.get("fails", {}).get("N", "0")),
        next_attempt_at=float(item.get("next", {}).get("N", "0")),
        public_root=item.get("root", {}).get("S", ""),
        backfilled=bool(item.get("bf", {}).get("BOOL", False)),
        links_dropped=bool(item.get("ldrop", {}).get("BOOL", False)),
        deleted_at=float(item.get("dtime", {}).get("N", "0")),
    )


def _known(stream: dict[str, Any]) -> dict[str, Any]:
    """A wake's stream as stored, without fields this version does not know (written by a
    newer one)."""
    return {name: value for name, value in stream.items() if name in _WAKE_STREAM_FIELDS}


_WAKE_STREAM_FIELDS = frozenset(known.name for known in fields(WakeStream))


def decode_link(item: items.Item) -> Link:
    incarnation = item.get("linc", {}).get("S") or None
    return Link(
        path=item["sk"]["S"],
        glob=bool(item.get("glob", {}).get("BOOL", False)),
        explicit=bool(item.get("expl", {}).get("BOOL", False)),
        acked=int(item.get("acked", {}).get("N", "0")),
        incarnation=incarnation,
        acked_exact=bool(item.get("ackx", {}).get("BOOL", False)),
        acked_snapshot=bool(item.get("acks", {}).get("BOOL", False)),
        skipped=decode_skip(item.get("skip")),
    )


# A link's `skip`: its last move up to the earliest retained offset (`model.Skip`).


def encode_skip(skip: Skip) -> items.Item:
    value: items.Item = {
        "from": items.s(skip.from_offset),
        "to": items.s(skip.to_offset),
        "at": items.n(skip.at),
    }
    if skip.incarnation is not None:
        value["inc"] = items.s(skip.incarnation)
    return {"M": value}


def decode_skip(value: items.Item | None) -> Skip | None:
    if not value or "M" not in value:
        return None
    entry = value["M"]
    return Skip(
        from_offset=entry["from"]["S"],
        to_offset=entry["to"]["S"],
        at=float(entry["at"]["N"]),
        incarnation=entry.get("inc", {}).get("S"),
    )


__all__ = ["Conflict", "SubscriptionStore"]
