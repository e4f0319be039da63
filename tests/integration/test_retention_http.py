"""Retention and compaction as a client sees them over HTTP: the policy at create and in HEAD,
410 Gone below the earliest retained offset in every read mode, reads from the beginning at the
earliest offset, a compacted stream's snapshot followed by the history after it, forks refused
below retention, and caches told to let go of what a cut announced will drop."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import sse_value

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.protocol.compaction import fold_state
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import Sealer, SealPolicy
from durable_streams_aws.core.storage.retention import RetentionRun

URL = "/v1/stream/s"
JSON_TYPE = {"Content-Type": "application/json"}
SEAL_ALL = SealPolicy(segment_bytes=600, hot_bytes=0, page_bytes=300)


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    settings = backend.settings.model_copy(
        update={
            "long_poll_timeout": 0.3,
            "sse_lifetime": 0.3,
            "max_read_bytes": 400,
            "max_read_from_start_bytes": 400,
        }
    )
    with TestClient(create_app(settings, backend.store)) as test_client:
        yield test_client


def change(kind: str, key: str, value: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "row", "key": key, "headers": {"operation": kind}}
    if kind != "delete":
        message["value"] = value
    return message


def compact(backend: Backend, delay: float = 0.0) -> None:
    Sealer(backend.store, SEAL_ALL).seal("s")
    report = RetentionRun(backend.store, delay=delay, compaction_min_bytes=1).run()
    assert report.cuts_announced == 1, report


def read_all(client: TestClient, offset: str) -> tuple[list[Any], str]:
    messages: list[Any] = []
    while True:
        response = client.get(URL, params={"offset": offset})
        assert response.status_code == 200, response.text
        messages.extend(response.json())
        offset = response.headers["stream-next-offset"]
        if response.headers.get("stream-up-to-date") == "true":
            return messages, offset


def written(client: TestClient, offsets: list[str] | None = None) -> list[dict[str, Any]]:
    history = [change("insert", f"k{n}", {"v": n}) for n in range(10)]
    history += [change("update", f"k{n}", {"v": n * 10}) for n in range(0, 10, 2)]
    history += [change("delete", f"k{n}") for n in range(0, 10, 3)]
    created = client.put(URL, headers={**JSON_TYPE, "Stream-Retention": "compact"})
    assert created.status_code == 201 and created.headers["stream-retention"] == "compact"
    for at in range(0, len(history), 5):
        response = client.post(URL, headers=JSON_TYPE, content=json.dumps(history[at : at + 5]))
        if offsets is not None:
            offsets.append(response.headers["stream-next-offset"])
    return history


def test_a_compacted_stream_reads_its_snapshot_then_the_history_after_it(
    client: TestClient, backend: Backend
) -> None:
    acknowledged: list[str] = []
    history = written(client, acknowledged)
    _, old_tail = read_all(client, "-1")
    early = acknowledged[0]
    compact(backend)
    later = [change("update", "k1", {"v": "late"}), change("insert", "new", {"v": 1})]
    client.post(URL, headers=JSON_TYPE, content=json.dumps(later))

    head = client.head(URL)
    earliest = head.headers["stream-earliest-offset"]
    assert earliest.endswith("_s") and earliest < old_tail
    assert head.headers["stream-retention"] == "compact"

    from_start, tail = read_all(client, "-1")
    assert from_start[0] == {"headers": {"control": "snapshot-start"}}
    end = from_start.index({"headers": {"control": "snapshot-end"}})
    assert from_start[end + 1 :] == later
    raw = [json.dumps(m).encode() for m in history + later]
    folded, _ = fold_state(raw)
    got, _ = fold_state([json.dumps(m).encode() for m in from_start])
    assert got.state() == folded.state()
    assert read_all(client, earliest)[0] == from_start  # its token reads the same
    # An offset handed out before the compaction: the same bytes (at the tail), or 410.
    assert read_all(client, old_tail)[0] == later
    gone = client.get(URL, params={"offset": early})
    assert gone.status_code == 410
    assert gone.headers["stream-earliest-offset"] == earliest
    assert gone.json()["error"] == "offset_gone" and gone.json()["earliest_offset"] == earliest
    assert tail > old_tail


def test_every_read_mode_answers_410_below_retention(client: TestClient, backend: Backend) -> None:
    acknowledged: list[str] = []
    written(client, acknowledged)
    first = acknowledged[0]
    compact(backend)
    zero = "0000000000000000_0000000000000000"
    for params in (
        {"offset": zero},
        {"offset": first},
        {"offset": first, "live": "long-poll"},
        {"offset": first, "live": "sse"},
        {"offset": zero[:-1] + "1_s"},  # a snapshot no longer the stream's
    ):
        response = client.get(URL, params=params)
        assert response.status_code == 410, params
        assert response.headers["cache-control"] == "no-store"
        assert re.fullmatch(r"0{16}_\d{16}_s", response.headers["stream-earliest-offset"])


def test_live_reads_from_the_beginning_get_the_snapshot_at_once(
    client: TestClient, backend: Backend
) -> None:
    written(client)
    compact(backend)
    polled = client.get(URL, params={"offset": "-1", "live": "long-poll"})
    assert polled.status_code == 200
    assert polled.json()[0] == {"headers": {"control": "snapshot-start"}}
    with client.stream("GET", URL, params={"offset": "-1", "live": "sse"}) as events:
        lines = [line for line in events.iter_lines() if line]
    assert lines[0] == "event: data" and lines[2] == "event: control"
    data = json.loads(sse_value(lines[1]))
    assert data[0] == {"headers": {"control": "snapshot-start"}}
    assert data[-1] == {"headers": {"control": "snapshot-end"}}
    # ...then where the history after the snapshot goes on: a plain offset.
    control = json.loads(sse_value(lines[3]))
    assert re.fullmatch(r"0{16}_\d{16}", control["streamNextOffset"])


def test_a_cut_announced_bounds_how_long_caches_keep_what_it_drops(
    client: TestClient, backend: Backend
) -> None:
    written(client)
    first = client.get(URL, params={"offset": "-1"})
    assert first.headers["cache-control"].startswith("public, max-age=60")
    Sealer(backend.store, SEAL_ALL).seal("s")
    RetentionRun(backend.store, delay=4.0, compaction_min_bytes=1).run()
    before = client.get(URL, params={"offset": "-1"})
    assert before.status_code == 200 and "snapshot-start" not in before.text
    age = int(re.search(r"max-age=(\d+)", before.headers["cache-control"]).group(1))  # type: ignore[union-attr]
    swr = int(re.search(r"stale-while-revalidate=(\d+)", before.headers["cache-control"]).group(1))  # type: ignore[union-attr]
    assert age > 0 and age + swr <= 3  # the time left, less a second
    time.sleep(4.1)
    after = client.get(URL, params={"offset": "-1"})
    assert after.json()[0] == {"headers": {"control": "snapshot-start"}}


def test_retention_by_size_with_forks_and_policies(client: TestClient, backend: Backend) -> None:
    policy = "max-bytes=600; max-age=86400"
    created = client.put(URL, headers={"Content-Type": "text/plain", "Stream-Retention": policy})
    assert created.headers["stream-retention"] == "max-age=86400; max-bytes=600"
    again = client.put(URL, headers={"Content-Type": "text/plain", "Stream-Retention": policy})
    assert again.status_code == 200
    other = client.put(URL, headers={"Content-Type": "text/plain", "Stream-Retention": "compact"})
    assert other.status_code == 400  # compaction folds JSON streams only
    conflict = client.put(URL, headers={"Content-Type": "text/plain"})
    assert conflict.status_code == 409  # another policy is another configuration
    offsets = []
    for n in range(100):
        response = client.post(URL, headers={"Content-Type": "text/plain"}, content=b"%020d" % n)
        offsets.append(response.headers["stream-next-offset"])
    Sealer(backend.store, SEAL_ALL).seal("s")
    RetentionRun(backend.store, delay=0).run()
    earliest = client.head(URL).headers["stream-earliest-offset"]
    assert earliest in offsets and not earliest.endswith("_s")
    kept = client.get(URL, params={"offset": "-1"})
    assert kept.content.startswith(b"%020d" % (offsets.index(earliest) + 1))
    assert client.get(URL, params={"offset": earliest}).content == kept.content
    fork = {"Stream-Forked-From": URL, "Content-Type": "text/plain"}
    below = client.put("/v1/stream/f1", headers={**fork, "Stream-Fork-Offset": offsets[0]})
    assert below.status_code == 410 and below.headers["stream-earliest-offset"] == earliest
    at = client.put("/v1/stream/f2", headers={**fork, "Stream-Fork-Offset": earliest})
    assert at.status_code == 201
    assert client.get("/v1/stream/f2", params={"offset": "-1"}).content == b""
    assert client.get("/v1/stream/f2", params={"offset": offsets[0]}).status_code == 410


@pytest.mark.parametrize("value", ["max-age=0", "max-age=1; max-age=2", "compact; max-age=1", "x"])
def test_a_malformed_policy_is_refused(client: TestClient, value: str) -> None:
    response = client.put(URL, headers={"Content-Type": "text/plain", "Stream-Retention": value})
    assert response.status_code == 400 and "Stream-Retention" in response.json()["message"]
    assert client.head(URL).status_code == 404


def test_until_bounds_what_follows_a_snapshot(backend: Backend) -> None:
    settings = backend.settings.model_copy(update={"long_poll_timeout": 0.3})
    with TestClient(create_app(settings, backend.store)) as client:
        acknowledged: list[str] = []
        written(client, acknowledged)
        compact(backend)
        later = [change("insert", "a", {"v": 1}), change("insert", "b", {"v": 2})]
        for message in later:
            response = client.post(URL, headers=JSON_TYPE, content=json.dumps([message]))
            acknowledged.append(response.headers["stream-next-offset"])
        bounded = client.get(URL, params={"offset": "-1", "until": acknowledged[-2]})
        assert bounded.status_code == 200 and bounded.json()[-1] == later[0]
        assert bounded.headers["stream-next-offset"] == acknowledged[-2]
        whole = client.get(URL, params={"offset": "-1"})
        assert whole.json()[-2:] == later
        before = client.get(URL, params={"offset": "-1", "until": acknowledged[0]})
        assert before.status_code == 410  # the range it bounds was folded away
