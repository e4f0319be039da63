"""Where sealing runs: `dsaws seal`, the scheduled sealer function, and `dsaws serve`'s
background sealer (which seals a stream soon after it is closed)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any

import httpx
from sealing_support import JSON, check_everywhere, filled_stream, partition_items
from support import ServerProcess, dsaws, invoke_function, store_on

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.http.middleware import RequestActivity
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import Backend, build_backend, ensure_resources
from durable_streams_aws.core.storage import Payload, Sealer, SealPolicy
from durable_streams_aws.core.storage import _items as items
from durable_streams_aws.core.storage.background import BackgroundSealer, QuietWait
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.lambda_bridge import lambda_environment


def emulator_env(emulator: Emulator) -> dict[str, str]:
    return {**os.environ, "AWS_ENDPOINT_URL": emulator.endpoint, "AWS_DEFAULT_REGION": "us-east-1"}


def only_segments(backend: Backend, path: str) -> bool:
    info = backend.store.get(path)
    assert info is not None
    stored = partition_items(backend, info.incarnation)
    return bool(stored) and all("pg" in item for item in stored)


def test_dsaws_seal_seals_marked_named_and_all_streams(
    backend: Backend, emulator: Emulator
) -> None:
    store = store_on(backend, seal_mark_bytes=1 << 40)  # commits mark nothing but closes
    closed = filled_stream(store, "closed", JSON, appends=20)
    store.append("closed", AppendIntent(JSON, False, True), Payload())
    named = filled_stream(store, "named", JSON, appends=20)
    other = filled_stream(store, "other", JSON, appends=20)
    table, bucket = backend.settings.table, backend.settings.bucket
    env = {**emulator_env(emulator), "DS_SEAL_HOT_BYTES": "0"}

    def seal(*args: str) -> dict[str, int]:
        return dsaws(env, "seal", "--table", table, "--bucket", bucket, *args)

    assert seal()["streams_examined"] == 1  # the close marked "closed"
    assert only_segments(backend, "closed") and not only_segments(backend, "named")
    assert seal("--path", "named")["segments_written"] == 1
    assert only_segments(backend, "named") and not only_segments(backend, "other")
    assert seal("--all")["streams_examined"] == 1  # only "other" has anything left to seal
    assert only_segments(backend, "other")
    for path, expected in (("closed", closed), ("named", named), ("other", other)):
        check_everywhere(store_on(backend), path, expected)


def test_the_sealer_function_seals_on_its_schedule_and_on_request(emulator: Emulator) -> None:
    suffix = uuid.uuid4().hex[:8]
    table, bucket = f"fn-seal-{suffix}", f"fn-seal-{suffix}"
    env = {
        **os.environ,
        **lambda_environment(emulator.endpoint, table, bucket),
        "DS_SEAL_HOT_BYTES": "0",
    }
    backend = build_backend(Settings(table=table, bucket=bucket), endpoint=emulator.endpoint)
    ensure_resources(backend)
    store = store_on(backend, seal_mark_bytes=0)  # every commit marks
    marked = filled_stream(store, "marked", JSON, appends=10)
    unmarked_store = store_on(backend, seal_mark_bytes=1 << 40)
    filled_stream(unmarked_store, "asked", JSON, appends=10)
    filled_stream(unmarked_store, "swept", JSON, appends=10)
    scheduled = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events"}
    events = [scheduled, {"path": "asked"}, {"all": True}]
    answers, _ = invoke_function("durable_streams_aws.functions.sealer.handler", events, env)
    assert [a["streams_examined"] for a in answers] == [1, 1, 1]
    assert all(a["segments_written"] == 1 for a in answers)
    for path in ("marked", "asked", "swept"):
        assert only_segments(backend, path)
    check_everywhere(store_on(backend), "marked", marked)
    assert not [i for i in _marks(backend)], "the scheduled run cleared the marks it served"


def test_dsaws_serve_seals_a_stream_soon_after_it_is_closed(emulator: Emulator) -> None:
    suffix = uuid.uuid4().hex[:8]
    table = bucket = f"serve-seal-{suffix}"
    env = {**emulator_env(emulator), "DS_SEAL_INTERVAL": "0.2"}
    args = ("--aws", "--table", table, "--bucket", bucket)
    url = "/v1/stream/chat"
    headers = {"Content-Type": "application/json"}
    with ServerProcess(*args, env=env) as server, httpx.Client(base_url=server.base_url) as client:
        assert client.put(url, headers=headers).status_code == 201
        for n in range(20):
            appended = client.post(url, content=json.dumps({"n": n}), headers=headers)
            assert appended.status_code == 204
        assert client.post(url, headers={"Stream-Closed": "true"}).status_code == 204
        backend = build_backend(Settings(table=table, bucket=bucket), endpoint=emulator.endpoint)
        deadline = time.monotonic() + 10
        while not only_segments(backend, "chat") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert only_segments(backend, "chat"), "sealed within seconds of its close"
        body = client.get(url, params={"offset": "-1"}).json()
        assert body == [{"n": n} for n in range(20)]


def test_the_background_sealer_waits_for_requests_to_stop(backend: Backend) -> None:
    """As `dsaws serve` runs it on the embedded emulator: no sweep while requests keep
    arriving (up to its longest wait), one soon after they stop."""
    filled_stream(backend.store, "quiet", JSON, appends=30)
    closing = backend.store.append("quiet", AppendIntent(JSON, False, True), Payload())
    assert closing.decision is not None and closing.decision.commits
    activity = RequestActivity()

    async def answer(scope: Any, receive: Any, send: Any) -> None:
        pass

    request = activity.around(answer)
    quiet = QuietWait(activity.idle_for, seconds=0.3, longest=60)
    sealing = BackgroundSealer(Sealer(backend.store, SealPolicy()), 0.05, quiet).start()
    try:
        until = time.monotonic() + 1.5
        while time.monotonic() < until:  # a request every 50 ms
            asyncio.run(request({"type": "http"}, None, None))
            time.sleep(0.05)
        assert not only_segments(backend, "quiet"), "no sweep while requests keep arriving"
        deadline = time.monotonic() + 10
        while not only_segments(backend, "quiet") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert only_segments(backend, "quiet"), "sealed once the requests stopped"
    finally:
        sealing.stop()


def _marks(backend: Backend) -> list[dict[str, object]]:
    response = backend.dynamodb.scan(TableName=backend.settings.table)
    return [i for i in response["Items"] if i["pk"]["S"].startswith(items.SEAL_PREFIX)]
