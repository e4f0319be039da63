"""Retention and compaction against a model, with runs that stop between any two steps.

Random histories of State Protocol inserts, updates, deletes and control messages are
appended by two store instances (as two Lambda instances), sealed, and cut by retention runs at
random points; each run is paused at a random AWS call while other instances append, seal,
read and run retention of their own, then either resumed or killed there (a crash). After
every step the stream is checked against the model, the list of what was acknowledged:

- every offset ever handed out (an append's, or where a read ended) reads exactly the
  messages the model holds from there, or is below the earliest retained position (410);
- a read from the beginning (the snapshot, then the history after it) folds to the state of
  everything acknowledged, and a snapshot folds to the state of the history it stands for:
  no half-written snapshot is ever visible;
- the earliest retained position never moves back, and a retention policy by size keeps at
  least its size once it has cut anything.

On moto and on DynamoDB Local.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any

import pytest
from support import FakeClock, store_on

from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.compaction import fold_state
from durable_streams_aws.core.protocol.retention import RetentionPolicy
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, DynamoStore, Payload, Sealer, SealPolicy
from durable_streams_aws.core.storage.gc import Collector
from durable_streams_aws.core.storage.retention import RetentionReport, RetentionRun

pytestmark = pytest.mark.both_dynamodbs

JSON = "application/json"
PATH = "m"
SMALL = SealPolicy(segment_bytes=700, hot_bytes=0, page_bytes=300)
STEPS = 45


class Crash(Exception):
    """The run's process died here."""


class Pause:
    """Stops a run at its `at`-th AWS call (counted over both clients) until released; then
    it goes on, or dies there (`crash`)."""

    def __init__(self, at: int, crash: bool) -> None:
        self.at = at
        self.crash = crash
        self.calls = 0
        self.reached = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def step(self) -> None:
        with self._lock:
            self.calls += 1
            stop = self.calls == self.at
        if not stop:
            return
        self.reached.set()
        self.release.wait(30)
        if self.crash:
            raise Crash(f"call {self.at}")


class PausingClient:
    """An AWS client whose API calls go through `pause.step` first."""

    def __init__(self, client: Any, pause: Pause) -> None:
        self._client = client
        self._pause = pause
        self._operations = set(client.meta.method_to_api_mapping)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name not in self._operations:
            return attribute

        def call(**kwargs: Any) -> Any:
            self._pause.step()
            return attribute(**kwargs)

        return call


def random_changes(rng: random.Random, live: set[str], count: int, serial: int) -> list[bytes]:
    out = []
    for n in range(count):
        roll = rng.random()
        if roll < 0.02:
            message: dict[str, Any] = {"headers": {"control": "reset"}}
            live.clear()
        elif roll < 0.05:
            control = rng.choice(["snapshot-start", "snapshot-end"])
            message = {"headers": {"control": control}}
        else:
            key = f"k{rng.randrange(12)}"
            if key not in live:
                operation = "insert"
                live.add(key)
            elif rng.random() < 0.25:
                operation = "delete"
                live.discard(key)
            else:
                operation = "update"
            message = {"type": rng.choice(["a", "b"]), "key": key}
            message["headers"] = {"operation": operation}
            if operation != "delete":
                message["value"] = {"n": serial + n, "pad": "x" * rng.choice([0, 10, 60])}
            if message["type"] == "b":
                live.discard(key)  # keys of type b are tracked loosely: inserts may repeat
        out.append(json.dumps(message, separators=(",", ":")).encode())
    return out


class Model:
    def __init__(self, compact: bool, max_bytes: int | None) -> None:
        self.compact = compact
        self.max_bytes = max_bytes
        self.messages: list[bytes] = []
        self.starts: list[int] = [0]  # where each message starts, and the tail last
        self.handed: set[int] = set()  # positions of offsets handed out
        self.floor = 0  # the earliest retained position seen so far

    def acknowledge(self, messages: list[bytes], end: int) -> None:
        for message in messages:
            self.messages.append(message)
            self.starts.append(self.starts[-1] + len(message))
        assert self.starts[-1] == end, "acknowledged at an unexpected offset"
        self.handed.add(end)

    def after(self, position: int) -> list[bytes]:
        return self.messages[self.starts.index(position) :]

    def before(self, position: int) -> list[bytes]:
        return self.messages[: self.starts.index(position)]


def read_from(store: DynamoStore, position: int, rng: random.Random) -> tuple[list[bytes], int]:
    info = store.get(PATH)
    assert info is not None
    out: list[bytes] = []
    while position < info.tail:
        batch = store.read(info, position, rng.choice([1, 200, 5000]))
        assert batch.end > position
        out.extend(batch.messages or ())
        position = batch.end
    return out, position


def check(
    store: DynamoStore, model: Model, clock: FakeClock, rng: random.Random, every: bool = False
) -> None:
    """The invariants, on every offset handed out (`every`) or a sample of them."""
    info = store.get(PATH)
    assert info is not None
    retained = info.retained_now(clock.now)
    assert retained.start >= model.floor, "the earliest retained position moved back"
    model.floor = retained.start
    if info.pending_cut is not None:
        assert info.pending_cut.retained.start >= info.retained.start
    handed = sorted(model.handed)
    if not every and len(handed) > 6:
        handed = sorted(rng.sample(handed, 6))
    for position in handed:
        if position < retained.start:
            continue  # a read there answers 410
        got, end = read_from(store, position, rng)
        assert got == model.after(position), f"different bytes at offset {position}"
        model.handed.add(end)
    kept, _ = read_from(store, retained.start, rng)
    assert kept == model.after(retained.start)
    if model.compact:
        snapshot = retained.snapshot
        assert (snapshot is None) == (retained.start == 0)
        prefix = list(store.snapshot_messages(snapshot)) if snapshot is not None else []
        state, refused = fold_state(prefix + kept)
        wanted, _ = fold_state(model.messages)
        assert refused is None and state.state() == wanted.state()
        if snapshot is not None:
            alone, _ = fold_state(prefix)
            assert alone.state() == fold_state(model.before(snapshot.at))[0].state()
    elif retained.start > 0:
        assert model.max_bytes is not None and info.tail - retained.start >= model.max_bytes


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("policy", ["compact", "max-bytes=900"])
def test_retention_against_the_model(backend: Backend, seed: int, policy: str) -> None:
    rng = random.Random(f"{seed}-{policy}")
    clock = FakeClock()
    cache = rng.choice([0, 1 << 20])
    stores = [store_on(backend, clock=clock, chunk_cache_bytes=cache) for _ in range(2)]
    parsed = (
        RetentionPolicy(compact=True) if policy == "compact" else RetentionPolicy(max_bytes=900)
    )
    stores[0].create(PATH, CreateSpec(JSON, retention=parsed))
    model = Model(parsed.compact, parsed.max_bytes)
    live: set[str] = set()
    report = RetentionReport()

    def append(store: DynamoStore) -> None:
        messages = random_changes(rng, live, rng.randint(1, 6), len(model.messages))
        payload = Payload(b"".join(messages), tuple(map(len, messages)))
        outcome = store.append(PATH, AppendIntent(JSON, True, False), payload)
        assert outcome.decision is not None and outcome.decision.commits
        assert outcome.info is not None
        model.acknowledge(messages, outcome.info.tail)

    def run_retention(store: DynamoStore) -> None:
        options = {
            "delay": rng.choice([0.0, 0.0, 5.0]),
            "retire_grace": rng.choice([0.0, 10.0]),
            "compaction_min_bytes": rng.choice([1, 400]),
        }
        RetentionRun(store, **options).run_stream(PATH, report)

    def other_step() -> None:
        store = rng.choice(stores)
        action = rng.choice(["append", "append", "append", "seal", "retain", "tick", "collect"])
        if action == "append":
            append(store)
        elif action == "seal":
            Sealer(store, SMALL).seal(PATH)
        elif action == "retain":
            run_retention(store)
        elif action == "tick":
            clock.now += rng.choice([1, 4, 11])
        else:
            Collector(store, orphan_grace_seconds=0, clock=clock).run()

    for _ in range(STEPS):
        if rng.random() < 0.3:
            # A run that stops at a random call while the others go on, then resumes or dies.
            pause = Pause(rng.randint(1, 14), crash=rng.random() < 0.5)
            paused = DynamoStore(
                PausingClient(backend.dynamodb, pause),
                PausingClient(backend.s3, pause),
                backend.settings.table,
                backend.settings.bucket,
                clock=clock,
            )
            failure: list[BaseException] = []

            def paused_run(
                store: DynamoStore = paused, failed: list[BaseException] = failure
            ) -> None:
                try:
                    run_retention(store)
                except Crash:
                    pass
                except BaseException as error:  # reported by the test, not lost in the thread
                    failed.append(error)

            worker = threading.Thread(target=paused_run)
            worker.start()
            while worker.is_alive() and not pause.reached.wait(0.01):
                pass  # the run stops at its call, or ends with fewer calls than that
            if pause.reached.is_set():
                for _ in range(rng.randint(0, 3)):
                    other_step()
            pause.release.set()
            worker.join(30)
            assert not worker.is_alive() and not failure, failure
        else:
            other_step()
        check(rng.choice(stores), model, clock, rng)
    # In the end everything is sealed and cut as far as the policy goes.
    Sealer(stores[0], SMALL).seal(PATH)
    clock.now += 20
    for _ in range(3):
        RetentionRun(stores[1], compaction_min_bytes=1, retire_grace=0).run_stream(PATH, report)
    Collector(stores[0], orphan_grace_seconds=0, clock=clock).run()
    check(stores[0], model, clock, rng, every=True)
    if parsed.compact:
        assert report.streams_compacted > 0
