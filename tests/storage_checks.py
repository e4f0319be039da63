"""Whole-store invariants the storage tests check after every scenario.

The binding rule (see `core.storage.dynamo`): whatever is written for one incarnation (chunk
items, S3 bodies and their message indexes, producer items) is only ever committed as part of
that same incarnation. A chunk of `d#<inc>` that names an object outside `data/<inc>/` is data
the collector will remove with another incarnation, or as an orphan.
"""

from __future__ import annotations

from typing import Any

from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import DynamoStore
from durable_streams_aws.core.storage import _items as items


def scan(backend: Backend) -> list[dict[str, Any]]:
    request: dict[str, Any] = {"TableName": backend.settings.table, "ConsistentRead": True}
    found: list[dict[str, Any]] = []
    while True:
        response = backend.dynamodb.scan(**request)
        found.extend(response["Items"])
        if "LastEvaluatedKey" not in response:
            return found
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def object_keys(backend: Backend) -> set[str]:
    paginator = backend.s3.get_paginator("list_objects_v2")
    return {
        obj["Key"]
        for page in paginator.paginate(Bucket=backend.settings.bucket)
        for obj in page.get("Contents", [])
    }


def assert_data_bound_to_incarnations(backend: Backend) -> None:
    """Every object a chunk names lies under the chunk's own incarnation, and exists."""
    objects = object_keys(backend)
    for item in scan(backend):
        partition = item["pk"]["S"]
        if not partition.startswith("d#"):
            continue
        incarnation = partition[2:]
        for attribute in ("k", "mk"):
            if attribute in item:
                key = item[attribute]["S"]
                assert key.startswith(f"data/{incarnation}/"), (
                    f"chunk {item['sk']['S']} of {incarnation} names {key}"
                )
                assert key in objects, f"chunk of {incarnation} names missing object {key}"


def assert_live_streams_read_back(backend: Backend, store: DynamoStore) -> None:
    """Every live stream reads back every byte up to its tail."""
    for item in scan(backend):
        if not (item["pk"]["S"].startswith("s#") and item["sk"]["S"] == items.META):
            continue
        info = items.decode_stream(item["pk"]["S"][2:], item)
        position = 0
        while position < info.tail:
            batch = store.read(info, position, 1 << 20)
            assert batch.end > position, f"{info.path} stalls at {position}"
            position = batch.end
        assert position == info.tail
