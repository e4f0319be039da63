"""What bulk jobs ask of the store: where a range may be split (chunk boundaries, across a
fork's segments too, with no query DynamoDB would refuse), and reads that never write (a job's
role may only read)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import FakeClock, store_on

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import DynamoStore

JSON = {"Content-Type": "application/json"}


class StrictQueries:
    """The DynamoDB client, refusing what DynamoDB refuses and the emulator lets through: a
    BETWEEN whose upper bound is below its lower bound."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def query(self, **request: Any) -> Any:
        values = request["ExpressionAttributeValues"]
        if ":hi" in values and values[":lo"]["S"] > values[":hi"]["S"]:
            raise AssertionError(f"DynamoDB refuses BETWEEN {values[':lo']} AND {values[':hi']}")
        return self.client.query(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


class NoWrites(StrictQueries):
    def __getattr__(self, name: str) -> Any:
        if name in {"put_item", "update_item", "delete_item", "transact_write_items"}:
            raise AssertionError(f"a read-only store called {name}")
        return super().__getattr__(name)


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    with TestClient(create_app(backend.settings, backend.store)) as test_client:
        yield test_client


def test_boundaries_are_chunk_ends_inside_the_range(client: TestClient, backend: Backend) -> None:
    client.put("/v1/stream/s", headers=JSON)
    for value in ([1], [22], [333]):  # chunks end at 1, 3 and 6
        assert client.post("/v1/stream/s", json=value, headers=JSON).status_code == 204
    fork = {"Stream-Forked-From": "/v1/stream/s", "Stream-Fork-Offset": f"{0:016d}_{3:016d}"}
    assert client.put("/v1/stream/f", headers=fork).status_code == 201
    assert client.post("/v1/stream/f", json=[4444], headers=JSON).status_code == 204  # 3..7

    store = DynamoStore(
        StrictQueries(backend.dynamodb), backend.s3, backend.settings.table, backend.settings.bucket
    )
    source, forked = store.get("s"), store.get("f")
    assert source is not None and forked is not None
    cases = {
        (source, 0, 6): [1, 3],
        (source, 1, 6): [3],
        (source, 0, 1): [],  # one byte: nothing strictly inside, and no query refused
        (source, 2, 3): [],
        (source, 5, 6): [],
        (forked, 0, 7): [1, 3],  # the inherited range's end is a boundary
        (forked, 2, 4): [3],
        (forked, 3, 7): [],
    }
    for (info, start, end), expected in cases.items():
        assert list(store.boundaries(info, start, end)) == expected, (info.path, start, end)


def test_a_read_only_store_sees_expiry_without_reaping(
    client: TestClient, backend: Backend
) -> None:
    client.put("/v1/stream/brief", headers={**JSON, "Stream-TTL": "60"})
    client.put("/v1/stream/kept", headers=JSON)
    clock = FakeClock()
    clock.now += 10**6  # long after "brief" expired
    reader = DynamoStore(
        NoWrites(backend.dynamodb),
        backend.s3,
        backend.settings.table,
        backend.settings.bucket,
        clock=clock,
        read_only=True,
    )
    assert reader.get("brief") is None and reader.get("kept") is not None
    assert reader.list_streams("", None, 1000).paths == ("kept",)
    writer = store_on(backend, clock=clock)
    assert writer.get("brief") is None  # a server reaps it when it meets it
    assert backend.store.get("brief") is None
