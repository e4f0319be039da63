"""Our adapter for the upstream client conformance suite (`interop/client_conformance_adapter.py`)
speaks the suite's JSON-lines protocol: a few commands against `dsaws serve`, as the suite's
runner sends them, and the answers it checks. The suite itself is not run here (it is another
project's code)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from interop.client_conformance_adapter import serve
from tests.support import ServerProcess


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with ServerProcess("--long-poll-timeout", "0.5") as server:
        yield f"{server.base_url}/v1/stream"


def converse(commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each command's answer, from one adapter session."""
    pending = [json.dumps(command) + "\n" for command in commands] + [""]
    answers: list[dict[str, Any]] = []

    async def lines() -> str:
        return pending.pop(0)

    asyncio.run(serve(lines, lambda text: answers.append(json.loads(text))))
    return answers


def test_the_adapter_answers_as_the_suite_expects(base_url: str) -> None:
    path = "/adapter-plain"
    answers = converse(
        [
            {"type": "init", "serverUrl": base_url},
            {"type": "create", "path": path, "contentType": "text/plain"},
            {"type": "create", "path": path, "contentType": "text/plain"},
            {"type": "append", "path": path, "data": "a", "seq": 1},
            {"type": "append", "path": path, "data": "b", "seq": 2},
            {"type": "append", "path": path, "data": "c", "seq": 1},
            {"type": "read", "path": path, "live": False},
            {"type": "read", "path": path, "offset": "now", "live": "long-poll", "timeoutMs": 900},
            {"type": "head", "path": "/adapter-missing"},
            {"type": "shutdown"},
        ]
    )
    init, new, again, first, second, stale, read, poll, missing, bye = answers
    assert init["success"] and init["features"]["longPoll"]
    assert (new["status"], again["status"]) == (201, 200)
    assert first["success"] and second["success"]
    assert (stale["errorCode"], stale["status"]) == ("SEQUENCE_CONFLICT", 409)
    assert read["chunks"] == [{"data": "ab", "offset": second["offset"]}]
    assert read["upToDate"] is True and read["status"] == 200
    assert poll["status"] == 204 and poll["offset"] == second["offset"] and poll["chunks"] == []
    assert missing["errorCode"] == "NOT_FOUND" and "adapter-missing" in missing["message"]
    assert bye == {"type": "shutdown", "success": True}


def test_the_adapter_reports_refused_arguments_in_the_suites_words(base_url: str) -> None:
    target = {"target": "idempotent-producer", "producerId": "p"}
    answers = converse(
        [
            {"type": "init", "serverUrl": base_url},
            {"type": "validate", "target": {**target, "epoch": -1}},
            {"type": "validate", "target": {**target, "maxBatchBytes": 0}},
            {"type": "validate", "target": {**target, "epoch": 0, "maxBatchBytes": 1024}},
        ]
    )
    _, epoch, size, valid = answers
    assert epoch["errorCode"] == "INVALID_ARGUMENT" and "epoch" in epoch["message"]
    assert size["errorCode"] == "INVALID_ARGUMENT" and "maxBatchBytes" in size["message"]
    assert valid == {"type": "validate", "success": True}


def test_the_adapter_drives_the_idempotent_producer(base_url: str) -> None:
    path = "/adapter-json"
    producer = {"path": path, "producerId": "p1", "epoch": 0, "autoClaim": False}
    answers = converse(
        [
            {"type": "init", "serverUrl": base_url},
            {"type": "create", "path": path, "contentType": "application/json"},
            {"type": "idempotent-append", **producer, "data": '{"n": 1}'},
            {
                "type": "idempotent-append-batch",
                **producer,
                "producerId": "p2",
                "items": ['{"n": 2}', '{"n": 3}'],
            },
            {"type": "idempotent-close", **producer},
            {"type": "idempotent-close", **producer},
            {"type": "read", "path": path, "live": False},
            {"type": "append", "path": path, "data": '{"n": 4}'},
        ]
    )
    _, _, single, batch, closed, again, read, late = answers
    assert single["success"] and batch["success"] and closed["success"]
    assert again["finalOffset"] == closed["finalOffset"]
    assert json.loads(read["chunks"][0]["data"]) == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert read["streamClosed"] is True
    assert late["errorCode"] == "STREAM_CLOSED"
