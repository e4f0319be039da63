"""The DynamoDB requests of the store's own flows (`core.storage.dynamo`), as plain data.

Each function takes plain values and answers the request (or transaction action) to send:
no client, no clock, no I/O, so the exact expressions are unit-tested
(`tests/unit/test_storage_requests.py`).

These forms are also a contract with the embedded emulator's fast path
(`infra._fast_item_requests`, `infra._fast_conditions`): it answers only updates of the form
`SET #a = :v` and `SET #a = #a + :v`, and conditions that compare attributes with values,
joined by AND, OR and NOT. A request outside those forms is still answered, by moto's slow
path; `tests/integration/test_store_fast_paths.py` runs the store's flows and fails when one
of their requests drops to it unexpectedly.
"""

from __future__ import annotations

from typing import Any

from . import _items as items
from .model import StreamInfo

Request = dict[str, Any]


def list_page(table: str, prefix: str, page_items: int, start: Request | None) -> Request:
    """One scan page of stream items whose paths start with `prefix` (from `start`, a last
    evaluated key, when given)."""
    request: Request = {
        "TableName": table,
        "Limit": page_items,
        "FilterExpression": "begins_with(pk, :prefix) AND sk = :meta",
        "ExpressionAttributeValues": {
            ":prefix": items.s(items.STREAM_PREFIX + prefix),
            ":meta": items.s(items.META),
        },
    }
    if start is not None:
        request["ExclusiveStartKey"] = start
    return request


def get_stream(table: str, path: str) -> Request:
    """A consistent read of the stream item."""
    return {"TableName": table, "Key": items.stream_key(path), "ConsistentRead": True}


def get_stream_and_producers(table: str, path: str, producer_ids: list[str]) -> Request:
    """One consistent batch read of the stream item and these producers' items."""
    keys = [items.stream_key(path), *(items.producer_key(path, p) for p in producer_ids)]
    return {"RequestItems": {table: {"Keys": keys, "ConsistentRead": True}}}


def create_stream(table: str, info: StreamInfo) -> Request:
    """A transaction action: the new stream item, if the path holds none."""
    return {
        "Put": {
            "TableName": table,
            "Item": items.encode_stream(info),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def reference_source(table: str, source: StreamInfo, position: int, now: float) -> Request:
    """A transaction action counting one more fork on `source`, if it is still live as read:
    the same incarnation, not deleted, not expired, and holding `position`."""
    values: dict[str, Any] = {
        ":inc": items.s(source.incarnation),
        ":one": items.n(1),
        ":position": items.n(position),
    }
    # At or below the readable tail, which the published tail may not have reached yet.
    condition = (
        "#inc = :inc AND attribute_not_exists(#del) AND (#tail >= :position OR #rsv >= :position)"
    )
    if source.expires_at is not None:
        # Only then: DynamoDB refuses a request with a value its expressions do not use.
        condition += " AND #exp > :now"
        values[":now"] = items.n(now)
    dead = source.oldest_live_access(now)
    if dead is not None:
        condition += " AND #acc > :dead"
        values[":dead"] = items.n(dead)
    names = {"#inc": "inc", "#del": "del", "#tail": "tail", "#rsv": "rsv", "#refs": "refs"}
    if source.expires_at is not None:
        names["#exp"] = "exp"
    if source.ttl_seconds is not None:
        names["#acc"] = "acc"
    return {
        "Update": {
            "TableName": table,
            "Key": items.stream_key(source.path),
            "UpdateExpression": "SET #refs = #refs + :one",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def renew_access(table: str, info: StreamInfo, now: float, dead: float) -> Request:
    """An UpdateItem moving the stream's access time to `now`: never for an expired stream
    (accessed at or before `dead`), never backwards."""
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "SET #acc = :now",
        "ConditionExpression": "#inc = :inc AND #acc > :dead AND #acc < :now",
        "ExpressionAttributeNames": {"#acc": "acc", "#inc": "inc"},
        "ExpressionAttributeValues": {
            ":now": items.n(now),
            ":dead": items.n(dead),
            ":inc": items.s(info.incarnation),
        },
    }


def soft_delete(table: str, info: StreamInfo) -> Request:
    """An UpdateItem marking a stream that forks still read as deleted."""
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "SET #del = :true",
        "ConditionExpression": "#inc = :inc AND #refs > :zero AND attribute_not_exists(#del)",
        "ExpressionAttributeNames": {"#del": "del", "#inc": "inc", "#refs": "refs"},
        "ExpressionAttributeValues": {
            ":true": {"BOOL": True},
            ":inc": items.s(info.incarnation),
            ":zero": items.n(0),
        },
    }


def delete_stream(table: str, info: StreamInfo) -> Request:
    """A transaction action removing the stream item of an incarnation nothing forks."""
    return {
        "Delete": {
            "TableName": table,
            "Key": items.stream_key(info.path),
            "ConditionExpression": "#inc = :inc AND #refs = :zero",
            "ExpressionAttributeNames": {"#inc": "inc", "#refs": "refs"},
            "ExpressionAttributeValues": {
                ":inc": items.s(info.incarnation),
                ":zero": items.n(0),
            },
        }
    }


def retire_incarnation(table: str, info: StreamInfo, now: float) -> Request:
    """A transaction action marking the incarnation's data for the collector."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **items.retire_key(info.incarnation),
                "path": items.s(info.path),
                "at": items.n(now),
            },
        }
    }


def release_source(table: str, source_path: str, source_incarnation: str) -> Request:
    """A transaction action counting one fork fewer on the source incarnation.

    Not a form the emulator's fast path answers (it adds, never subtracts): deletes of forks
    are rare, and moto answers this one itself."""
    return {
        "Update": {
            "TableName": table,
            "Key": items.stream_key(source_path),
            "UpdateExpression": "SET #refs = #refs - :one",
            "ConditionExpression": "#inc = :inc AND #refs > :zero",
            "ExpressionAttributeNames": {"#refs": "refs", "#inc": "inc"},
            "ExpressionAttributeValues": {
                ":one": items.n(1),
                ":zero": items.n(0),
                ":inc": items.s(source_incarnation),
            },
        }
    }
