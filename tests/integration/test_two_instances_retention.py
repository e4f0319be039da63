"""Two `dsaws serve --aws` processes on one table and bucket, both sealing and running
retention and compaction in the background as often as they can (two runs race on the same
streams), while clients append through both and read through both, and the collector runs
with no grace: a compacted stream read from the beginning always folds to the state of
everything acknowledged, a stream kept by size always reads a suffix of what was acknowledged
that ends with the last append, and every offset an append was acknowledged at reads exactly
the messages after it or answers 410 naming the earliest offset."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import httpx
from support import ServerProcess, dsaws

from durable_streams_aws.core.protocol.compaction import fold_state
from durable_streams_aws.infra.emulator import Emulator

AGGRESSIVE = {
    "DS_SEAL_INTERVAL": "0.05",
    "DS_SEAL_HOT_BYTES": "0",
    "DS_SEGMENT_BYTES": "1500",
    "DS_SEAL_PAGE_BYTES": "300",
    "DS_RETENTION_INTERVAL": "0.05",
    "DS_RETENTION_DELAY": "0",
    "DS_COMPACTION_MIN_BYTES": "1",
}
JSON_TYPE = {"Content-Type": "application/json"}
STATE, LOG = "/v1/stream/state", "/v1/stream/log"


def test_two_instances_cutting_the_same_streams_lose_and_change_nothing(
    emulator: Emulator,
) -> None:
    suffix = uuid.uuid4().hex[:12]
    table = bucket = f"ret2-{suffix}"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        **AGGRESSIVE,
    }
    args = ("--aws", "--table", table, "--bucket", bucket, "--long-poll-timeout", "1")
    changes: list[bytes] = []
    logged: list[int] = []
    acknowledged: dict[str, list[tuple[str, int]]] = {STATE: [], LOG: []}
    with (
        ServerProcess(*args, env=env) as one,
        ServerProcess(*args, env=env) as two,
        httpx.Client(base_url=one.base_url, timeout=30) as first,
        httpx.Client(base_url=two.base_url, timeout=30) as second,
    ):
        clients = [first, second]
        compact = {**JSON_TYPE, "Stream-Retention": "compact"}
        assert first.put(STATE, headers=compact).status_code == 201
        by_size = {**JSON_TYPE, "Stream-Retention": "max-bytes=2000"}
        assert second.put(LOG, headers=by_size).status_code == 201
        for round_ in range(40):
            writer = clients[round_ % 2]
            batch = [_change(round_, n) for n in range(4)]
            response = writer.post(STATE, content=json.dumps(batch), headers=JSON_TYPE)
            assert response.status_code == 204, response.text
            changes.extend(json.dumps(m, separators=(",", ":")).encode() for m in batch)
            acknowledged[STATE].append((response.headers["Stream-Next-Offset"], len(changes)))
            numbers = list(range(len(logged), len(logged) + 3))
            body = json.dumps([{"n": n, "pad": "p" * 40} for n in numbers])
            response = clients[1 - round_ % 2].post(LOG, content=body, headers=JSON_TYPE)
            assert response.status_code == 204, response.text
            logged.extend(numbers)
            acknowledged[LOG].append((response.headers["Stream-Next-Offset"], len(logged)))
            if round_ % 10 == 9:
                dsaws(env, "gc", "--table", table, "--bucket", bucket, "--orphan-grace", "0")
            for client in clients:
                _check(client, changes, logged, acknowledged)
        heads = [client.head(STATE).headers.get("Stream-Earliest-Offset") for client in clients]
        assert heads[0] == heads[1] and heads[0] is not None and heads[0].endswith("_s")
        assert first.head(LOG).headers.get("Stream-Earliest-Offset") is not None


def _change(round_: int, n: int) -> dict[str, Any]:
    key = f"k{(round_ * 4 + n) % 7}"
    operation = "delete" if (round_ + n) % 9 == 0 else "update"
    message: dict[str, Any] = {"type": "row", "key": key, "headers": {"operation": operation}}
    if operation != "delete":
        message["value"] = {"round": round_, "n": n}
    return message


def _check(
    client: httpx.Client,
    changes: list[bytes],
    logged: list[int],
    acknowledged: dict[str, list[tuple[str, int]]],
) -> None:
    state, _ = fold_state(changes)
    read = [json.dumps(m, separators=(",", ":")).encode() for m in _read(client, STATE, "-1")]
    assert fold_state(read)[0].state() == state.state()
    kept = [m["n"] for m in _read(client, LOG, "-1")]
    assert kept and kept == logged[len(logged) - len(kept) :]
    for offset, count in acknowledged[STATE][-5:]:
        after = _read(client, STATE, offset)
        if after is not None:
            assert [json.dumps(m, separators=(",", ":")).encode() for m in after] == changes[count:]
    for offset, count in acknowledged[LOG]:
        after = _read(client, LOG, offset)
        if after is not None:
            assert [m["n"] for m in after] == logged[count:]


def _read(client: httpx.Client, url: str, offset: str) -> Any:
    """Every message from `offset` on; None when it answers 410 below the earliest offset."""
    messages: list[Any] = []
    while True:
        response = client.get(url, params={"offset": offset})
        if response.status_code == 410 and not messages:
            assert response.json()["error"] == "offset_gone"
            assert response.headers["Stream-Earliest-Offset"] > offset or offset.endswith("_s")
            return None
        assert response.status_code == 200, response.text
        messages.extend(response.json())
        offset = response.headers["Stream-Next-Offset"]
        if response.headers.get("Stream-Up-To-Date") == "true":
            return messages
