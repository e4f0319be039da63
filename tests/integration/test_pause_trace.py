"""What `DS_PAUSE_TRACE` records (`core.pause_trace`), through the hooks it uses: the embedded
emulator reports each turn at its lock, with its journal write, and the steps of a compaction;
`Emulator.pace` is asked before each turn; the trace is written as JSON lines that read back;
without the setting, nothing is installed."""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
from pathlib import Path
from typing import Any

from test_emulator_journal import clients

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.pause_trace import PauseTrace, read_trace
from durable_streams_aws.core.serving import prepare
from durable_streams_aws.core.storage.background import SweepRun
from durable_streams_aws.core.storage.bootstrap import ensure_table
from durable_streams_aws.infra.emulator import Emulator


def test_the_emulator_reports_each_turn_at_its_lock_and_asks_pace_first(tmp_path: Path) -> None:
    emulator = Emulator(data_dir=tmp_path / "data")
    trace = PauseTrace(tmp_path / "trace.jsonl")
    asked: list[str] = []
    try:
        dynamodb, _ = clients(emulator)
        table = f"trace-{uuid.uuid4().hex[:10]}"
        ensure_table(dynamodb, table)
        emulator.observe(trace.lock)
        emulator.pace(lambda: asked.append(threading.current_thread().name))
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "b"}})
        dynamodb.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}})
        emulator.compact()
        emulator.observe(None)
        emulator.pace(None)
        dynamodb.get_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"S": "b"}})
    finally:
        emulator.stop()
    trace.close()
    turns = read_trace(tmp_path / "trace.jsonl")
    assert [t["action"] for t in turns] == [
        "PutItem",
        "GetItem",
        "compaction: take the state",
        "compaction: add the tail, rename",
    ]
    assert asked == [threading.current_thread().name] * 4  # once before each of those turns
    put, get = turns[0], turns[1]
    assert put["kind"] == "lock" and put["thread"] == threading.current_thread().name
    assert put["requested"] <= put["acquired"] <= put["released"]
    assert put["journal_seconds"] > 0 and get["journal_seconds"] == 0  # a read journals nothing


def test_the_served_app_s_requests_collections_and_sweeps_are_recorded(tmp_path: Path) -> None:
    trace = PauseTrace(tmp_path / "trace.jsonl")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def sent(message: Any) -> None:
        pass

    store: Any = type("Store", (), {"dynamodb": None, "s3": None, "table": "t", "bucket": "b"})()
    settings = Settings(seal_interval=0, collect_interval=0, retention_interval=0)
    serving = prepare(app, settings, store, embedded=True, trace=trace)
    try:
        asyncio.run(serving.asgi({"type": "http", "method": "POST", "path": "/s"}, None, sent))
        gc.collect()
        trace.sweep(SweepRun("sealing", 1.0, 2.0, 3.0, 3.5, 0.25, {"segments_written": 1}))
    finally:
        gc.callbacks.remove(trace.collection)
        serving.stop()
    trace.close()
    events = read_trace(tmp_path / "trace.jsonl")
    request = next(e for e in events if e["kind"] == "request")
    assert (request["method"], request["path"], request["status"]) == ("POST", "/s", 204)
    assert request["start"] <= request["end"] and request["cpu"] >= 0
    collection = next(e for e in events if e["kind"] == "gc")
    assert collection["generation"] == 2 and collection["seconds"] >= 0
    sweep = next(e for e in events if e["kind"] == "sweep")
    assert sweep["name"] == "sealing" and sweep["report"] == {"segments_written": 1}


def test_without_the_setting_no_trace_is_installed(tmp_path: Path) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    store: Any = type("Store", (), {"dynamodb": None, "s3": None, "table": "t", "bucket": "b"})()
    serving = prepare(
        app,
        Settings(seal_interval=0, collect_interval=0, retention_interval=0),
        store,
        embedded=True,
    )
    try:
        assert serving.asgi is app
        assert not any(isinstance(getattr(c, "__self__", None), PauseTrace) for c in gc.callbacks)
    finally:
        serving.stop()
    assert Settings().pause_trace is None
