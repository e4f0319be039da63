"""`dsaws stats`: the figures of a store, counted from its table and bucket, before and after
the sealer and the collector have run, with streams kept by size and compacted (cuts pending,
in effect and recorded, refusals), and through the command on a stopped server's data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient
from support import FakeClock, ServerProcess, run_dsaws, store_on

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.retention import RetentionPolicy
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    Collector,
    CreateSpec,
    CreateStatus,
    DynamoStore,
    ForkRequest,
    Payload,
    Sealer,
    SealPolicy,
    gather_stats,
)
from durable_streams_aws.core.storage import stats as stats_module
from durable_streams_aws.core.storage.retention import RetentionRun

pytestmark = [pytest.mark.integration, pytest.mark.both_dynamodbs]

TEXT = {"Content-Type": "text/plain"}
STREAMS = "/v1/stream"
SUBSCRIPTIONS = "/v1/stream/__ds/subscriptions"


def test_stats_count_streams_bytes_marks_and_subscription_backlog(backend: Backend) -> None:
    settings = backend.settings.model_copy(
        update={"webhook_secret": "stats", "webhook_allow_localhost": False}
    )
    big = b"B" * (backend.store.chunks.inline_max_bytes + 1)
    with TestClient(create_app(settings, backend.store)) as client:
        hook = {"type": "webhook", "pattern": "jobs/*", "webhook": {"url": "https://h.example/x"}}
        assert client.put(f"{SUBSCRIPTIONS}/watch", json=hook).status_code == 201
        for path in ("jobs/a", "jobs/b", "other", "gone"):
            assert client.put(f"{STREAMS}/{path}", headers=TEXT).status_code == 201
        for _ in range(3):
            assert (
                client.post(f"{STREAMS}/jobs/a", content=b"x" * 100, headers=TEXT).status_code
                == 204
            )
        assert client.post(f"{STREAMS}/jobs/b", content=big, headers=TEXT).status_code == 204
        closing = {**TEXT, "Stream-Closed": "true"}
        assert client.post(f"{STREAMS}/other", content=b"end", headers=closing).status_code == 204
        assert client.delete(f"{STREAMS}/gone").status_code == 204

    seen: list[int] = []
    stats = gather_stats(backend.store, seen.append)
    assert (stats.streams, stats.streams_closed, stats.streams_soft_deleted) == (3, 1, 0)
    assert stats.stream_bytes == 300 + len(big) + 3
    assert stats.bytes_inline == 303 and stats.bytes_unsealed_in_s3 == len(big)
    assert stats.bytes_sealed == 0 and stats.sealed_share == 0.0
    assert stats.marks_waiting >= 1  # the closed stream, at least
    assert stats.incarnations_to_collect == 1  # the deleted stream's data
    assert stats.subscriptions == 1 and stats.subscription_links == 2
    # Nothing is acknowledged yet: both linked streams' data is the backlog.
    assert stats.links_behind == 2
    assert stats.subscription_backlog_bytes == 300 + len(big)
    assert stats.s3_objects == 1 and stats.s3_bytes >= len(big)
    assert seen and seen[-1] == stats.table_items

    Sealer(backend.store, SealPolicy(hot_bytes=0)).run_all()
    Collector(backend.store, orphan_grace_seconds=0).run()
    after = gather_stats(backend.store)
    assert after.stream_bytes == stats.stream_bytes
    assert after.bytes_sealed > 0 and after.sealed_share > 0.5
    assert after.incarnations_to_collect == 0
    report = after.as_dict()
    assert report["sealed_share"] == round(after.sealed_share, 4)
    assert set(report) >= {"streams", "bytes_sealed", "marks_waiting", "subscription_backlog_bytes"}


JSON = "application/json"
SMALL_SEGMENTS = SealPolicy(segment_bytes=2000, hot_bytes=0, page_bytes=500)


def append(store: DynamoStore, path: str, messages: list[bytes]) -> None:
    payload = Payload(b"".join(messages), tuple(map(len, messages)))
    outcome = store.append(path, AppendIntent(JSON, True, False), payload)
    assert outcome.decision is not None and outcome.decision.commits


def row(kind: str, key: str, n: int) -> bytes:
    value = {"n": n, "pad": "p" * 30}
    message = {"type": "row", "key": key, "value": value, "headers": {"operation": kind}}
    return json.dumps(message).encode()


def test_stats_count_retention_compaction_cuts_and_refusals(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stats_module, "REFUSALS_LISTED", 2)
    clock = FakeClock()
    store = store_on(backend, clock=clock)
    compact, by_size = RetentionPolicy(compact=True), RetentionPolicy(max_bytes=3000)
    store.create("state", CreateSpec(JSON, retention=compact))
    inserts = [row("insert", f"k{n}", n) for n in range(10)]
    updates = [row("update", f"k{n % 10}", n) for n in range(10, 200)]
    for at in range(0, 200, 20):
        append(store, "state", (inserts + updates)[at : at + 20])
    store.create("logs", CreateSpec(JSON, retention=by_size))
    for at in range(0, 300, 10):
        append(store, "logs", [b'{"n":%d,"pad":"%s"}' % (n, b"x" * 40) for n in range(at, at + 10)])
    store.create("plain", CreateSpec(JSON))
    append(store, "plain", [b'{"n":1}'])
    for name in ("odd-1", "odd-2", "odd-3"):  # histories compaction cannot fold
        store.create(name, CreateSpec(JSON, retention=compact))
        append(store, name, [inserts[0], b'{"just":"json"}'])
    for path in ("state", "logs", "odd-1", "odd-2", "odd-3"):
        Sealer(store, SMALL_SEGMENTS).seal(path)
    state_tail = store.get("state").tail  # type: ignore[union-attr]

    nothing = gather_stats(store)
    assert (nothing.streams_with_retention, nothing.streams_with_compaction) == (1, 4)
    assert nothing.bytes_dropped_by_retention == nothing.bytes_compacted == 0
    assert nothing.snapshots == nothing.cuts_pending == nothing.streams_refused_compaction == 0
    assert nothing.compaction_refused == []

    report = RetentionRun(store, clock=clock, delay=30, compaction_min_bytes=1).run()
    assert report.cuts_announced == 2 and report.compactions_refused == 3
    pending = gather_stats(store)
    # Announced, not in effect: nothing dropped or compacted yet.
    assert pending.cuts_pending == 2
    assert pending.bytes_dropped_by_retention == pending.bytes_compacted == 0
    assert pending.snapshots == pending.snapshot_bytes == 0
    assert pending.streams_refused_compaction == 3
    assert len(pending.compaction_refused) == 2  # bounded; the count says how many
    for refusal in pending.compaction_refused:
        assert refusal["path"].startswith("odd-") and "message 1" in refusal["reason"]

    clock.now += 30  # in effect, not yet recorded by a run: counted all the same
    effective = gather_stats(store)
    logs, state = store.get("logs"), store.get("state")
    assert logs is not None and state is not None
    dropped = logs.retained_now(clock.now).start
    assert 0 < dropped <= logs.tail - 3000
    assert effective.bytes_dropped_by_retention == dropped
    snapshot = state.retained_now(clock.now).snapshot
    assert snapshot is not None and snapshot.folded == state_tail
    assert (effective.snapshots, effective.bytes_compacted) == (1, state_tail)
    assert 0 < effective.snapshot_bytes == snapshot.size < state_tail
    assert effective.cuts_pending == 2

    assert RetentionRun(store, clock=clock, compaction_min_bytes=1).run().cuts_recorded == 2
    # A fork reads its source's snapshot: one object, counted once.
    fork = CreateSpec(None, fork=ForkRequest("state", state_tail))
    assert store.create("copy", fork).status is CreateStatus.CREATED
    copy = store.get("copy")
    assert copy is not None and copy.retained.snapshot == snapshot
    recorded = gather_stats(store)
    assert recorded.cuts_pending == 0 and recorded.streams == 7
    assert recorded.bytes_dropped_by_retention == dropped
    assert (recorded.snapshots, recorded.bytes_compacted) == (1, state_tail)
    assert recorded.snapshot_bytes == snapshot.size
    shown = recorded.as_dict()
    assert shown["compaction_refused"] == recorded.compaction_refused
    assert json.loads(json.dumps(shown)) == shown


def test_dsaws_stats_reads_a_stopped_servers_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with (
        ServerProcess("--data-dir", str(data_dir)) as server,
        httpx.Client(base_url=f"{server.base_url}{STREAMS}", timeout=30) as client,
    ):
        assert client.put("/one", headers=TEXT).status_code == 201
        assert client.post("/one", content=b"hello", headers=TEXT).status_code == 204
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    run = run_dsaws(env, "stats", "--data-dir", str(data_dir))
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["streams"] == 1 and report["stream_bytes"] == 5, report
    assert report["bytes_inline"] == 5 and report["table_items"] >= 2
    assert report["streams_with_retention"] == report["streams_with_compaction"] == 0
    assert report["cuts_pending"] == 0 and report["compaction_refused"] == []
