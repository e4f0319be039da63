"""The upstream packages built on the protocol, from npm, against `dsaws serve` and against the
upstream reference server (npm @durable-streams/server, which shows that a test asks only what
the packages get from a server that behaves as upstream's does):

- `@durable-streams/y-durable-streams`: its YjsServer in front of the server, three editors
  (YjsProvider, over SSE and over long-poll) editing at once, compactions, a late joiner;
- `@durable-streams/state`: a StreamDB preloaded in one shot from a stream of several MiB, and
  one following the stream live; and, against ours only, on streams the server compacts (State
  Protocol compaction, issue 40): a preload before and after the compaction, and a StreamDB
  following live across one, all equal to the Python fold of the history;
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
from durable_streams_aws.core.protocol.compaction import fold_state
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


# ---------------------------------------------------------------- StreamDB and compaction
#
# The reference server cannot be compared with here: it has no retention and no compaction (it
# takes `Stream-Retention` at create without a word and keeps every message for ever, as
# test_the_reference_server_keeps_no_retention_policy shows), so these tests run against ours
# only and compare with the state the Python fold computes from the history written.

# `dsaws serve` sealing everything at once and compacting whatever it sealed, with no delay.
COMPACTING = {
    "DS_SEAL_INTERVAL": "0.2",
    "DS_SEAL_HOT_BYTES": "0",
    "DS_RETENTION_INTERVAL": "0.3",
    "DS_RETENTION_DELAY": "0",
    "DS_COMPACTION_MIN_BYTES": "1",
}


class StateHistory:
    """Change messages over `keys` keys, from a seed: an insert of a key not present, else an
    update or, one time in eight, a delete. Every update's value is a full row: the Python fold
    replaces a row with an update's value (as STATE-PROTOCOL.md says materializers do), where
    StreamDB merges it into the row (TanStack DB's default `rowUpdateMode: "partial"`, which
    StreamDB's collections keep); with full rows both agree."""

    def __init__(self, seed: int, keys: int = 1000) -> None:
        self.random = random.Random(seed)
        self.keys = keys
        self.present: set[int] = set()
        self.version = 0

    def changes(self, count: int) -> list[dict[str, Any]]:
        out = []
        for _ in range(count):
            n = self.random.randrange(self.keys)
            if n not in self.present:
                operation = "insert"
                self.present.add(n)
            elif self.random.random() < 0.125:
                operation = "delete"
                self.present.discard(n)
            else:
                operation = "update"
            self.version += 1
            out.append(item_event(n, operation, self.version))
        return out


def python_fold(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows `core.protocol.compaction` folds the history into, by key."""
    fold, refusal = fold_state(json.dumps(event, ensure_ascii=False).encode() for event in events)
    assert refusal is None
    assert {kind for kind, _ in fold.state()} == {"item"}
    return {key: value for (_, key), value in fold.state().items()}


def rows(got: dict[str, Any]) -> dict[str, Any]:
    """The driver's rows by key; each row is the whole of what the collection holds."""
    by_key = {row["id"]: row for row in got["items"]}
    assert len(by_key) == len(got["items"])
    return by_key


def create_compacted(url: str) -> None:
    response = httpx.put(
        url,
        headers={"content-type": "application/json", "stream-retention": "compact"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    assert response.headers["stream-retention"] == "compact"


def tail(url: str) -> str:
    head = httpx.head(url, timeout=30)
    assert head.status_code == 200 and "stream-earliest-offset" not in head.headers
    return head.headers["stream-next-offset"]


def compacted_through(url: str, offset: str, within: float = 60) -> str:
    """Waits until the stream's earliest offset is a snapshot (`..._s`) of everything before
    `offset` (a tail HEAD gave), and returns it. (The test reads the offsets' positions;
    clients treat them as opaque.) It asks every 1.5 s: the sealer and the retention run of
    `dsaws serve` wait for a second without requests (or 30 s), and a HEAD is one."""
    end = time.monotonic() + within
    position = int(offset.split("_")[1])
    while True:
        time.sleep(1.5)
        earliest = httpx.head(url, timeout=30).headers.get("stream-earliest-offset")
        if earliest and earliest.endswith("_s") and int(earliest.split("_")[1]) + 1 >= position:
            return earliest
        assert time.monotonic() < end, f"not compacted through {offset} in {within} s: {earliest}"


def test_the_reference_server_keeps_no_retention_policy(
    server: str, request: pytest.FixtureRequest
) -> None:
    """Ours keeps and echoes a create's `Stream-Retention`; the reference server takes it and
    ignores it (it has no retention and no compaction), hence no comparison with it below."""
    url = stream_url(server, "retention")
    response = httpx.put(
        url,
        headers={"content-type": "application/json", "stream-retention": "compact"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    policy = httpx.head(url, timeout=30).headers.get("stream-retention")
    ours = request.node.callspec.params["server"] == "ours"
    assert policy == ("compact" if ours else None)


def test_streamdb_preload_gives_the_same_state_after_compaction_as_before_and_as_python(
    tmp_path: Any, record_property: Any
) -> None:
    """30,000 inserts, updates and deletes over 1,000 keys, in appends of 2,000, preloaded
    (`live: false`) before the compaction and after it: the same rows, the Python fold's. The
    state before comes from a server that seals but runs no retention, then one on the same
    data folds the history: a compaction during the first preload could answer it 410."""
    path = f"/v1/stream/eco/state-compacted-{uuid.uuid4().hex[:8]}"
    history = StateHistory(seed=40).changes(30_000)
    counts = {op: 0 for op in ("insert", "update", "delete")}
    for event in history:
        counts[event["headers"]["operation"]] += 1
    assert min(counts.values()) > 2000, counts
    expected = python_fold(history)
    assert 800 < len(expected) <= 1000
    data = str(tmp_path / "data")
    sealing_only = {**COMPACTING, "DS_RETENTION_INTERVAL": "0"}
    with ServerProcess("--data-dir", data, env=sealing_only) as ours:
        url = ours.base_url + path
        create_compacted(url)
        written = append_json(url, history, per_request=2000)
        end = tail(url)
        started = time.monotonic()
        before = run_ecosystem("state", "preload", "--url", url, "--timeout", "30")
        before_seconds = time.monotonic() - started
        assert tail(url) == end  # still uncompacted
    with ServerProcess("--data-dir", data, env=COMPACTING) as ours:
        url = ours.base_url + path
        started = time.monotonic()
        earliest = compacted_through(url, end)
        compaction_seconds = time.monotonic() - started
        started = time.monotonic()
        after = run_ecosystem("state", "preload", "--url", url, "--timeout", "30")
        after_seconds = time.monotonic() - started
        # What it read from -1: the snapshot, one insert per row, and nothing after it.
        read = httpx.get(url, params={"offset": "-1"}, timeout=30)
    assert rows(before) == rows(after) == expected
    assert read.headers["stream-next-offset"] == end
    messages = read.json()
    assert messages[0] == {"headers": {"control": "snapshot-start"}}
    assert messages[-1] == {"headers": {"control": "snapshot-end"}}
    assert [m["headers"]["operation"] for m in messages[1:-1]] == ["insert"] * len(expected)
    assert python_fold(messages[1:-1]) == expected
    assert before["offsets"][0] == after["offsets"][0] == "-1"
    assert after["offset"] == end
    figures = {
        "history_bytes": written,
        "preload_bytes_before": before["bytes"],
        "preload_bytes_after": after["bytes"],
        "preload_requests": [before["requests"], after["requests"]],
        "preload_seconds": [round(before_seconds, 2), round(after_seconds, 2)],
        "compaction_seconds": round(compaction_seconds, 2),
        "earliest": earliest,
    }
    record_property("compaction", figures)
    print(f"compaction figures: {figures}")
    assert before["bytes"] >= written * 0.9
    assert after["bytes"] * 10 < before["bytes"], figures


@pytest.mark.parametrize("live", ["true", "sse"])
def test_streamdb_following_live_across_a_compaction_ends_equal_to_the_python_fold(
    live: str,
) -> None:
    """A StreamDB preloaded from the empty stream, so before any compaction, follows 20,000
    changes, the compaction of all of them into a snapshot, and then 3,000 more changes over
    the same keys. (`live: true`, StreamDB's default, long-polls: the client 0.2.7 documents
    it as SSE for JSON and sets `live=long-poll` for it.)"""
    history = StateHistory(seed=41)
    written: list[dict[str, Any]] = []
    with ServerProcess(env=COMPACTING) as ours:
        url = f"{ours.base_url}/v1/stream/eco/state-follow-{uuid.uuid4().hex[:8]}"
        create_compacted(url)
        command = [*ecosystem_command("state"), "follow", "--url", url, "--live", live]
        with subprocess.Popen(
            [*command, "--until", "item-99999", "--timeout", "60"],
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
                tail(url)  # nothing compacted yet
                changes = history.changes(20_000)
                append_json(url, changes, per_request=2000)
                written += changes
                compacted_through(url, tail(url))
                for _ in range(3):
                    changes = history.changes(1000)
                    append_json(url, changes, per_request=250)
                    written += changes
                    time.sleep(0.3)
                changes = [item_event(99_999)]
                append_json(url, changes)
                written += changes
                out, err = follower.communicate(timeout=60)
            finally:
                if follower.poll() is None:
                    follower.kill()
    assert follower.returncode == 0, err[-3000:]
    got = json.loads(out)
    # It never started again from the beginning (nor from the snapshot): it read across.
    assert got["offsets"].count("-1") == 1
    assert not any(offset.endswith("_s") for offset in got["offsets"])
    assert rows(got) == python_fold(written)


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
