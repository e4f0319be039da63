"""Random interleavings of appends, reads, forks, closes, deletes, sealing and collection, by
two instances with memories of their own, every read checked against a model of the stream."""

from __future__ import annotations

import random

import pytest
from sealing_support import BYTES, JSON, Expected, append_units, check_everywhere, message
from support import store_on

from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    Collector,
    CreateSpec,
    CreateStatus,
    DynamoStore,
    ForkRequest,
    Payload,
    Presence,
    Sealer,
    SealPolicy,
)

PATHS = ["a", "b", "c", "d"]
ACTIONS = [
    *("create", "create", "fork", "fork", "close", "delete", "collect"),
    *("append",) * 8,
    *("seal",) * 3,
    *("marks", "read", "read"),
]
POLICIES = [
    SealPolicy(segment_bytes=200, hot_bytes=0, page_bytes=64),
    SealPolicy(segment_bytes=1000, hot_bytes=100, page_bytes=300),
    SealPolicy(segment_bytes=5000, hot_bytes=0, page_bytes=2000),
]


class Model:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.streams: dict[str, Expected] = {}
        self.closed: set[str] = set()
        self.serial = 0
        self.segments = 0  # written by the sealer: the run is only worth something if many
        self.forks = 0

    def units(self, expected: Expected) -> list[bytes]:
        count = self.rng.randint(1, 4)
        self.serial += count
        if expected.json:
            return [message(self.rng, self.serial + i) for i in range(count)]
        return [bytes(self.rng.getrandbits(8) for _ in range(self.rng.choice([1, 30, 90])))]


def step(model: Model, stores: list[DynamoStore], rng: random.Random) -> None:
    store = rng.choice(stores)
    action = rng.choice(ACTIONS)
    live = list(model.streams)
    free = [p for p in PATHS if p not in model.streams]
    if live and action in {"append", "seal", "read"}:
        path = rng.choice(live)
    elif free and action in {"create", "fork"}:
        path = rng.choice(free)
    else:
        path = rng.choice(PATHS)
    expected = model.streams.get(path)
    if action == "create" and expected is None:
        content_type = rng.choice([JSON, BYTES])
        if store.create(path, CreateSpec(content_type)).status is CreateStatus.CREATED:
            model.streams[path] = Expected(content_type)
    elif action == "append" and expected is not None and path not in model.closed:
        append_units(store, path, expected, model.units(expected))
    elif action == "fork" and expected is None:
        live = [p for p in model.streams if p != path]
        if live:
            source = rng.choice(live)
            origin = model.streams[source]
            cut = rng.randrange(len(origin.units) + 1)
            anchor = origin.boundaries()[cut]
            outcome = store.create(path, CreateSpec(None, fork=ForkRequest(source, anchor)))
            if outcome.status is CreateStatus.CONFLICT:  # a deleted stream its forks still read
                held = store.snapshot(path)
                assert held is not None and held.soft_deleted
                return
            assert outcome.status is CreateStatus.CREATED, outcome.status
            model.streams[path] = Expected(origin.content_type, list(origin.units[:cut]))
            model.forks += 1
    elif action == "close" and expected is not None and path not in model.closed:
        store.append(path, AppendIntent(expected.content_type, False, True), Payload())
        model.closed.add(path)
    elif action == "delete" and expected is not None:
        assert store.delete(path) is Presence.FOUND
        del model.streams[path]
        model.closed.discard(path)
    elif action == "seal":
        model.segments += Sealer(store, rng.choice(POLICIES)).seal(path).segments_written
    elif action == "marks":
        model.segments += Sealer(store, rng.choice(POLICIES)).run().segments_written
    elif action == "collect":
        Collector(store, orphan_grace_seconds=0).run()
    elif action == "read" and expected is not None:
        check_one_read(store, path, expected, rng)


def check_one_read(store: DynamoStore, path: str, expected: Expected, rng: random.Random) -> None:
    info = store.get(path)
    assert info is not None and not info.soft_deleted and info.tail == expected.tail
    start = rng.choice(expected.boundaries())
    batch = store.read(info, start, rng.choice([1, 50, 400, 1 << 20]))
    expected.check(batch, start)
    assert batch.end > start or start == info.tail


@pytest.mark.parametrize(
    ("seed", "cache_bytes", "inline_max"),
    [
        *((seed, None, None) for seed in (1, 2, 3, 4)),
        *((1, 0, None), (2, 900, None), (3, 2500, None)),
        # Most appends an object in S3 each: reads fetch them ahead, while the other instance
        # seals them away and the collector deletes them.
        *((9, None, 40), (6, 0, 40), (7, 900, 40), (8, None, 1)),
    ],
)
def test_random_interleavings_read_back_what_the_model_holds(
    backend: Backend, seed: int, cache_bytes: int | None, inline_max: int | None
) -> None:
    """`cache_bytes`: what each instance's chunk cache holds (None: the default, all of it
    here; 0: none; a few entries, so that reads go from memory to queries and back).
    `inline_max`: the largest append kept in its chunk item (None: the default, 64 KiB)."""
    rng = random.Random(seed)
    options: dict[str, int] = {"seal_mark_bytes": 150}
    if cache_bytes is not None:
        options["chunk_cache_bytes"] = cache_bytes
    if inline_max is not None:
        options["inline_max_bytes"] = inline_max
    stores = [store_on(backend, **options), store_on(backend, **options)]
    model = Model(rng)
    for _ in range(200):
        step(model, stores, rng)
        # Every live stream reads right from some offset after every step, in either instance.
        for path, expected in model.streams.items():
            check_one_read(rng.choice(stores), path, expected, rng)
    assert model.segments >= 10 and model.forks >= 2, (model.segments, model.forks)
    for path, expected in model.streams.items():
        for store in stores:
            check_everywhere(store, path, expected)
    Sealer(stores[0], POLICIES[0]).run()
    for path, expected in model.streams.items():
        check_everywhere(store_on(backend), path, expected)
