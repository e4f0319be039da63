"""Helpers for the sealing tests: streams with known contents, reads checked against them,
and AWS clients that crash on a chosen call."""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, DynamoStore, Payload, ReadBatch
from durable_streams_aws.core.storage import _items as items

JSON = "application/json"
BYTES = "application/octet-stream"


@dataclass
class Expected:
    """What a stream holds: its messages (JSON) or its appended bodies, in order."""

    content_type: str
    units: list[bytes] = field(default_factory=list)
    origin: int = 0  # where the stream's positions start counting its units

    @property
    def json(self) -> bool:
        return self.content_type == JSON

    @property
    def tail(self) -> int:
        return self.origin + sum(map(len, self.units))

    def boundaries(self) -> list[int]:
        found, position = [], self.origin
        for unit in self.units:
            found.append(position)
            position += len(unit)
        return [*found, position]

    def data(self) -> bytes:
        return b"".join(self.units)

    def check(self, batch: ReadBatch, start: int) -> None:
        """The batch read from `start` (a boundary) is exactly what the stream holds there."""
        assert batch.start == start
        if self.json:
            assert batch.messages is not None
            index = self.boundaries().index(start)
            wanted = self.units[index : index + len(batch.messages)]
            assert list(batch.messages) == wanted, f"messages from {start}"
            assert batch.end == start + sum(map(len, batch.messages))
        else:
            offset = start - self.origin
            assert batch.data == self.data()[offset : offset + len(batch.data)], f"from {start}"
            assert batch.end == start + len(batch.data)


def message(rng: random.Random, serial: int) -> bytes:
    return b'{"n":%d,"pad":"%s"}' % (serial, b"x" * rng.choice([0, 5, 30, 120]))


def append_units(store: DynamoStore, path: str, expected: Expected, units: list[bytes]) -> None:
    data = b"".join(units)
    lengths = tuple(map(len, units)) if expected.json else None
    outcome = store.append(
        path, AppendIntent(expected.content_type, True, False), Payload(data, lengths)
    )
    assert outcome.decision is not None and outcome.decision.commits, outcome
    expected.units.extend(units if expected.json else [data])


def filled_stream(
    store: DynamoStore, path: str, content_type: str, appends: int, seed: int = 1
) -> Expected:
    rng = random.Random(seed)
    store.create(path, CreateSpec(content_type))
    expected = Expected(content_type)
    serial = 0
    for _ in range(appends):
        count = rng.randint(1, 4)
        if content_type == JSON:
            units = [message(rng, serial + i) for i in range(count)]
        else:
            units = [bytes(rng.getrandbits(8) for _ in range(rng.choice([3, 40, 200])))]
        serial += count
        append_units(store, path, expected, units)
    return expected


def read_through(
    store: DynamoStore,
    path: str,
    expected: Expected,
    start: int,
    budget: int,
    most: int | None = None,
) -> int:
    """Read from `start` to the tail (or `most` reads), checking every batch; the number of
    reads."""
    info = store.get(path)
    assert info is not None
    position, reads = start, 0
    while position < info.tail and (most is None or reads < most):
        batch = store.read(info, position, budget)
        expected.check(batch, position)
        assert batch.end > position, f"no progress at {position}"
        position, reads = batch.end, reads + 1
    assert most is not None or position == expected.tail
    return reads


def check_everywhere(store: DynamoStore, path: str, expected: Expected) -> None:
    """Every boundary (a sample of them on long streams), at budgets small and large."""
    bounds = expected.boundaries()[:-1]
    sample = bounds if len(bounds) <= 16 else random.Random(7).sample(bounds, 16)
    for start in sorted(sample):
        for budget in (1, 90, 700):
            read_through(store, path, expected, start, budget, most=2)
    for start in sorted(sample)[::4]:
        read_through(store, path, expected, start, 1 << 20)


def partition_items(backend: Backend, incarnation: str) -> list[dict[str, Any]]:
    response = backend.dynamodb.query(
        TableName=backend.settings.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": items.s(items.chunk_partition(incarnation))},
        ConsistentRead=True,
    )
    return list(response["Items"])


def object_keys(backend: Backend) -> set[str]:
    listing = backend.s3.list_objects_v2(Bucket=backend.settings.bucket)
    return {o["Key"] for o in listing.get("Contents", [])}


class Crash(Exception):
    """The process died here."""


class CrashingClient:
    """An AWS client that fails its `nth` call of `operation` (1-based), as if the process
    died just before it; every other call goes through."""

    def __init__(self, client: Any, operation: str, nth: int = 1) -> None:
        self._client = client
        self._operation = operation
        self._nth = nth
        self._lock = threading.Lock()
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name != self._operation:
            return attribute

        def call(**kwargs: Any) -> Any:
            with self._lock:
                self.calls[name] += 1
                crash = self.calls[name] == self._nth
            if crash:
                raise Crash(f"{name} #{self._nth}")
            return attribute(**kwargs)

        return call
