"""The upstream packages built on the protocol, from npm, against `dsaws serve` and against the
upstream reference server (npm @durable-streams/server, which shows that a test asks only what
the packages get from a server that behaves as upstream's does):

- `@durable-streams/y-durable-streams`: its YjsServer in front of the server, three editors
  (YjsProvider, over SSE and over long-poll) editing at once, compactions, a late joiner;
- `@durable-streams/state`: a StreamDB preloaded in one shot from a stream of several MiB, and
  one following the stream live;
- `@durable-streams/aisdk-transport`: a chat generation (the AI SDK's mock model) whose reader
  disconnects mid-generation and reconnects;
- `@durable-streams/client`: the one-shot read (`stream({ live: false })`) of multi-MiB streams.

Each package runs in a Node driver of ours (`interop/ecosystem/*.mjs`), which prints what it
saw; the assertions are here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support import ServerProcess

from benchmarks._processes import reference_server
from interop import ecosystem_command, run_ecosystem

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


@pytest.fixture(scope="module", params=["ours", "reference"])
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The server's root URL (streams live under /v1/stream)."""
    if request.param == "ours":
        with ServerProcess() as ours:
            yield ours.base_url
    else:
        with reference_server() as (streams, _):
            yield streams.removesuffix("/v1/stream")


def stream_url(server: str, name: str) -> str:
    return f"{server}/v1/stream/eco/{name}-{uuid.uuid4().hex[:8]}"


def create(url: str, content_type: str) -> None:
    response = httpx.put(url, headers={"content-type": content_type}, timeout=30)
    assert response.status_code == 201, response.text


def append(url: str, body: bytes, content_type: str) -> None:
    response = httpx.post(url, content=body, headers={"content-type": content_type}, timeout=60)
    assert response.status_code in (200, 204), response.text


def append_json(url: str, values: list[Any], per_request: int = 3000) -> int:
    """Append each value as a message, several to a request; returns the bytes sent."""
    sent = 0
    for start in range(0, len(values), per_request):
        body = json.dumps(values[start : start + per_request], ensure_ascii=False).encode()
        append(url, body, "application/json")
        sent += len(body)
    return sent


# ---------------------------------------------------------------- Yjs

TOKEN = re.compile(r"<[^<>]+>")


@pytest.fixture(scope="module")
def yjs_runs(server: str) -> dict[str, Any]:
    """One driver run per live mode, shared by the tests that judge its parts; a fresh set for
    each server (hence the dependence on `server`)."""
    return {}


def yjs_run(runs: dict[str, Any], server: str, live: str) -> dict[str, Any]:
    if live not in runs:
        doc = f"doc-{live}-{uuid.uuid4().hex[:8]}"
        try:
            runs[live] = run_ecosystem("yjs", "--ds-url", server, "--live", live, "--doc", doc)
        except RuntimeError as failure:
            runs[live] = failure
    if isinstance(runs[live], RuntimeError):
        raise runs[live]
    return dict(runs[live])


LIVE_MODES = ["sse", "long-poll"]


@pytest.mark.parametrize("live", LIVE_MODES)
def test_yjs_editors_editing_at_once_converge(
    yjs_runs: dict[str, Any], server: str, live: str
) -> None:
    got = yjs_run(yjs_runs, server, live)
    first, *others = got["editors"]
    assert all(editor == first for editor in others)
    # Every editor's every insertion is in the document exactly once.
    assert sorted(TOKEN.findall(first["text"])) == sorted(got["tokens"])
    assert sorted(first["map"]) == sorted(token[1:-1] for token in got["tokens"])


@pytest.mark.parametrize("live", LIVE_MODES)
def test_yjs_compactions_succeed(yjs_runs: dict[str, Any], server: str, live: str) -> None:
    """The compactor reads the updates stream from the last snapshot's offset with its last
    component incremented by one: inside the append that follows the snapshot."""
    compactions = yjs_run(yjs_runs, server, live)["compactions"]
    assert compactions["failed"] == []
    assert len(compactions["ok"]) >= 2  # at least one while the editors edit, and the final one


@pytest.mark.parametrize("live", LIVE_MODES)
def test_yjs_an_editor_joining_after_compaction_syncs_the_whole_document(
    yjs_runs: dict[str, Any], server: str, live: str
) -> None:
    got = yjs_run(yjs_runs, server, live)
    # The late joiner starts from a snapshot, then reads the updates made after it.
    assert str(got["snapshotLocation"]).endswith("_snapshot")
    assert got["late"] == {"synced": True, **got["editors"][0]}, got["errors"]


# ---------------------------------------------------------------- StreamDB


def item_event(n: int, operation: str = "insert", version: int = 0) -> dict[str, Any]:
    key = f"item-{n:05d}"
    event: dict[str, Any] = {"type": "item", "key": key, "headers": {"operation": operation}}
    if operation != "delete":
        event["value"] = {"id": key, "n": n, "text": f"v{version} " + "ünïcode·" * (n % 9)}
    return event


def apply(state: dict[str, dict[str, Any]], events: list[dict[str, Any]]) -> None:
    for event in events:
        if event["headers"]["operation"] == "delete":
            state.pop(event["key"])
        else:
            state[event["key"]] = event["value"]


def test_streamdb_preloads_a_stream_of_several_mebibytes_in_one_shot(server: str) -> None:
    url = stream_url(server, "state-preload")
    create(url, "application/json")
    events = [item_event(n) for n in range(30_000)]
    events += [item_event(n, "update", 1) for n in range(0, 30_000, 7)]
    events += [item_event(n, "delete") for n in range(3, 30_000, 11)]
    assert append_json(url, events) > 3 * MIB
    expected: dict[str, dict[str, Any]] = {}
    apply(expected, events)
    got = run_ecosystem("state", "preload", "--url", url, "--timeout", "10")
    assert len(got["items"]) == len(expected)
    assert {item["id"]: item for item in got["items"]} == expected


@pytest.mark.parametrize("live", ["long-poll", "sse"])
def test_streamdb_follows_changes_appended_after_its_preload(server: str, live: str) -> None:
    url = stream_url(server, f"state-live-{live}")
    create(url, "application/json")
    before = [item_event(n) for n in range(1000)]
    append_json(url, before)
    expected: dict[str, dict[str, Any]] = {}
    apply(expected, before)
    command = [*ecosystem_command("state"), "follow", "--url", url, "--live", live]
    with subprocess.Popen(
        [*command, "--until", "item-99999", "--timeout", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as follower:
        try:
            assert follower.stderr is not None
            lines = []
            while (line := follower.stderr.readline()) not in ("ready\n", ""):
                lines.append(line)
            assert line == "ready\n", "".join(lines)
            # Inserts, updates and deletes in several appends, with pauses in which the
            # follower is waiting at the tail; the last item ends the follow.
            rounds = [
                [item_event(n, "update", 1) for n in range(0, 1000, 10)],
                [item_event(n) for n in range(1000, 1500)],
                [item_event(n, "delete") for n in range(5, 1500, 25)],
                [item_event(99_999)],
            ]
            for changes in rounds:
                append_json(url, changes, per_request=200)
                apply(expected, changes)
                time.sleep(0.3)
            out, err = follower.communicate(timeout=30)
        finally:
            if follower.poll() is None:
                follower.kill()
    assert follower.returncode == 0, err[-3000:]
    got = json.loads(out)
    assert {item["id"]: item for item in got["items"]} == expected


# ---------------------------------------------------------------- AI SDK transport


def test_aisdk_reader_that_reconnects_mid_generation_gets_every_chunk_once(server: str) -> None:
    got = run_ecosystem("aisdk", "--streams", f"{server}/v1/stream", "--chat", uuid.uuid4().hex)
    written, first, resumed = got["written"], got["first"], got["resumed"]
    assert written[0]["type"] == "start" and written[-1]["type"] == "finish"
    # The first reader left mid-generation, and the reconnected one caught up while the
    # generation was still going (it then followed it live).
    assert 0 < len(first) <= got["writtenAtDisconnect"] < len(written)
    assert got["finishedAtReconnect"] is False
    assert first == written[: len(first)]
    assert resumed == written
    deltas = [chunk["delta"] for chunk in resumed if chunk["type"] == "text-delta"]
    assert deltas == [f"word{i} " for i in range(60)]
    assert got["text"] == got["expectedText"] == "".join(deltas)


# ---------------------------------------------------------------- one-shot reads


def test_one_shot_body_read_of_a_7_mb_binary_stream(server: str) -> None:
    url = stream_url(server, "one-shot-binary")
    create(url, "application/octet-stream")
    data = random.Random(7).randbytes(7_000_000)
    for start in range(0, len(data), MIB):
        append(url, data[start : start + MIB], "application/octet-stream")
    got = run_ecosystem("one_shot", "--url", url, "--as", "body")
    assert got["requests"] == 1  # what makes it one-shot: the whole stream in one response
    assert (got["length"], got["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert got["upToDate"] is True


def test_one_shot_json_read_of_30000_items(server: str) -> None:
    url = stream_url(server, "one-shot-json")
    create(url, "application/json")
    items = [
        {"n": n, "blob": base64.b64encode(n.to_bytes(4, "big") * 12).decode()}
        for n in range(30_000)
    ]
    assert append_json(url, items) > 2 * MIB
    got = run_ecosystem("one_shot", "--url", url, "--as", "json")
    assert got["requests"] == 1
    assert len(got["items"]) == len(items) and got["items"] == items
    assert got["upToDate"] is True
