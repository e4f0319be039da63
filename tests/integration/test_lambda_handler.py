"""The API function's own behaviour: structured logs, EMF metrics, window-mode SSE by itself."""

from __future__ import annotations

import json
import os

from support import invoke_function

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import build_backend, ensure_resources
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.lambda_bridge import function_url_event, lambda_environment


def test_handler_logs_requests_and_emits_metrics(emulator: Emulator) -> None:
    ensure_resources(build_backend(Settings(table="fn", bucket="fn-data"), emulator.endpoint))
    path = "/v1/stream/fn"
    events = [
        function_url_event("PUT", path, [("content-type", "text/plain")], b"", "::1"),
        function_url_event("POST", path, [("content-type", "text/plain")], b"12345", "::1"),
        function_url_event("GET", f"{path}?offset=-1&live=sse", [], b"", "::1"),
    ]
    env = {
        **os.environ,
        **lambda_environment(emulator.endpoint, "fn", "fn-data"),
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    answers, lines = invoke_function("durable_streams_aws.functions.api.handler", events, env)
    assert [a["statusCode"] for a in answers] == [201, 204, 200]
    # Inside Lambda, SSE is answered in bounded-window mode: a complete body, not a stream.
    sse = answers[2]
    assert sse["headers"]["content-type"] == "text/event-stream"
    assert "data:12345" in sse["body"] and '"upToDate":true' in sse["body"]

    records = [json.loads(line) for line in lines if line.startswith("{")]
    requests = [r for r in records if r.get("message") == "request"]
    assert [(r["method"], r["status"]) for r in requests] == [
        ("PUT", 201),
        ("POST", 204),
        ("GET", 200),
    ]
    for record in requests:
        assert record["path"] == path and record["latency_ms"] >= 0
        assert record["function_request_id"]
    metrics = [r for r in records if "_aws" in r]
    appended = [m for m in metrics if "Appends" in m]
    assert len(appended) == 1 and appended[0]["BytesAppended"] == [5.0]
    assert any("Reads" in m for m in metrics)
