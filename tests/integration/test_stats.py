"""`dsaws stats`: the figures of a store, counted from its table and bucket, before and after
the sealer and the collector have run, and through the command on a stopped server's data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient
from support import ServerProcess, run_dsaws

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import Collector, Sealer, SealPolicy, gather_stats

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
