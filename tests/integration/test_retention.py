"""Retention and State Protocol compaction on the store: cuts, snapshots, 410s, forks, and
what a retention run removes (on moto and on DynamoDB Local)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from support import FakeClock, store_on

from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.compaction import fold_state
from durable_streams_aws.core.protocol.retention import RetentionPolicy
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    CreateSpec,
    CreateStatus,
    DynamoStore,
    ForkRequest,
    Payload,
    Sealer,
    SealPolicy,
)
from durable_streams_aws.core.storage.gc import Collector
from durable_streams_aws.core.storage.retention import RetentionReport, RetentionRun

JSON = "application/json"
SMALL = SealPolicy(segment_bytes=2000, hot_bytes=0, page_bytes=500)

pytestmark = pytest.mark.both_dynamodbs


def change(kind: str, key: str, value: Any = None) -> bytes:
    message: dict[str, Any] = {"type": "row", "key": key, "headers": {"operation": kind}}
    if kind != "delete":
        message["value"] = value
    return json.dumps(message, separators=(",", ":")).encode()


def append(store: DynamoStore, path: str, messages: list[bytes]) -> None:
    payload = Payload(b"".join(messages), tuple(map(len, messages)))
    outcome = store.append(path, AppendIntent(JSON, True, False), payload)
    assert outcome.decision is not None and outcome.decision.commits


def history(rng: random.Random, count: int, keys: int) -> list[bytes]:
    live: dict[str, int] = {}
    out = []
    for serial in range(count):
        key = f"k{rng.randrange(keys)}"
        if key not in live:
            out.append(change("insert", key, {"n": serial}))
            live[key] = serial
        elif rng.random() < 0.2:
            out.append(change("delete", key))
            del live[key]
        else:
            out.append(change("update", key, {"n": serial}))
            live[key] = serial
    return out


def read_all(store: DynamoStore, path: str, start: int) -> list[bytes]:
    info = store.get(path)
    assert info is not None
    out: list[bytes] = []
    position = start
    while position < info.tail:
        batch = store.read(info, position, 700)
        out.extend(batch.messages or ())
        position = batch.end
    return out


def run(store: DynamoStore, clock: FakeClock, **options: Any) -> RetentionReport:
    return RetentionRun(store, clock=clock, compaction_min_bytes=1, **options).run()


def test_compaction_folds_sealed_history_into_a_snapshot(backend: Backend) -> None:
    clock = FakeClock()
    store = store_on(backend, clock=clock)
    policy = RetentionPolicy(compact=True)
    assert store.create("s", CreateSpec(JSON, retention=policy)).status is CreateStatus.CREATED
    messages = history(random.Random(3), 400, 40)
    for at in range(0, len(messages), 20):
        append(store, "s", messages[at : at + 20])
    Sealer(store, SMALL).seal("s")
    before = store.get("s")
    assert before is not None and before.sealed == before.tail

    report = run(store, clock, delay=30)
    assert report.cuts_announced == 1 and report.streams_compacted == 1
    pending = store.get("s")
    assert pending is not None and pending.pending_cut is not None
    # Announced, not yet in effect: every offset reads as before.
    assert pending.retained_now(clock.now).start == 0
    assert read_all(store, "s", 0) == messages

    clock.now += 30
    effective = store.get("s")
    assert effective is not None
    retained = effective.retained_now(clock.now)
    assert retained.snapshot is not None and retained.start == before.tail
    snapshot = store.snapshot_messages(retained.snapshot)
    expected, refusal = fold_state(messages)
    assert refusal is None
    folded, again = fold_state(snapshot)
    assert again is None and folded.state() == expected.state()
    assert json.loads(snapshot[0]) == {"headers": {"control": "snapshot-start"}}
    assert json.loads(snapshot[-1]) == {"headers": {"control": "snapshot-end"}}

    # The next run records it; once the grace has passed, another retires the history.
    assert run(store, clock).cuts_recorded == 1
    clock.now += 120
    retired = run(store, clock)
    assert retired.items_retired > 0
    append(store, "s", [change("insert", "late", 1)])
    assert read_all(store, "s", before.tail) == [change("insert", "late", 1)]
    Collector(store, orphan_grace_seconds=0, clock=clock).run()
    info = store.get("s")
    assert info is not None and info.retained.snapshot is not None
    assert store.snapshot_messages(info.retained.snapshot) == snapshot


def test_retention_by_size_drops_whole_sealed_segments(backend: Backend) -> None:
    clock = FakeClock()
    store = store_on(backend, clock=clock)
    store.create("s", CreateSpec(JSON, retention=RetentionPolicy(max_bytes=3000)))
    messages = [b'{"n":%d,"pad":"%s"}' % (n, b"x" * 40) for n in range(300)]
    for at in range(0, len(messages), 10):
        append(store, "s", messages[at : at + 10])
    Sealer(store, SMALL).seal("s")
    report = run(store, clock)
    assert report.cuts_announced == 1
    info = store.get("s")
    assert info is not None
    start = info.retained_now(clock.now).start
    assert 0 < start <= info.tail - 3000
    # What is kept reads exactly as before.
    offsets = [0]
    for message in messages:
        offsets.append(offsets[-1] + len(message))
    assert start in offsets
    assert read_all(store, "s", start) == messages[offsets.index(start) :]
    # A fork below it is refused; at it, it reads what is kept.
    below = CreateSpec(None, fork=ForkRequest("s", start - len(messages[0])))
    assert store.create("f1", below).status is CreateStatus.OFFSET_GONE
    at = store.create("f2", CreateSpec(None, fork=ForkRequest("s", start)))
    assert at.status is CreateStatus.CREATED


def test_a_history_that_is_not_state_protocol_is_refused_compaction(backend: Backend) -> None:
    clock = FakeClock()
    store = store_on(backend, clock=clock)
    store.create("s", CreateSpec(JSON, retention=RetentionPolicy(compact=True)))
    append(store, "s", [change("insert", "a", 1), b'{"just":"json"}', change("delete", "a")])
    Sealer(store, SMALL).seal("s")
    report = run(store, clock)
    assert report.compactions_refused == 1 and report.cuts_announced == 0
    info = store.get("s")
    assert info is not None and info.compaction_refused is not None
    assert "message 1" in info.compaction_refused
    assert read_all(store, "s", 0)[1] == b'{"just":"json"}'


def test_a_state_too_large_for_a_response_is_refused_until_the_stream_grows(
    backend: Backend,
) -> None:
    clock = FakeClock()
    store = store_on(backend, clock=clock)
    store.create("s", CreateSpec(JSON, retention=RetentionPolicy(compact=True)))
    append(store, "s", [change("insert", f"k{n}", {"text": '"quoted"' * 20}) for n in range(30)])
    Sealer(store, SMALL).seal("s")
    asked: list[int] = []

    def fits(messages: tuple[bytes, ...]) -> bool:
        asked.append(len(messages))
        return False  # as a host whose encoding doubles every quote would answer

    def run_once() -> RetentionReport:
        options = {"compaction_min_bytes": 1000, "snapshot_fits": fits}
        return RetentionRun(store, clock=clock, **options).run()  # type: ignore[arg-type]

    first = run_once()
    assert first.compactions_refused == 1 and first.cuts_announced == 0 and asked == [32]
    info = store.get("s")
    assert info is not None and info.compaction_refused is not None
    assert "would not fit one response" in info.compaction_refused
    assert run_once().compactions_refused == 0 and asked == [32]  # not read again...
    append(store, "s", [change("delete", f"k{n}") for n in range(30)] * 2)
    Sealer(store, SMALL).seal("s")
    assert run_once().compactions_refused == 1 and len(asked) == 2  # ...until it has grown
