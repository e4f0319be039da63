"""The figures operators alarm on come from the code paths they describe: the API function's
EMF lines for each kind of request, and its request id in a response header and its logs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from support import emf_records, invoke_function, store_on, values_of

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.retention import RetentionPolicy
from durable_streams_aws.core.runtime import build_backend, ensure_resources
from durable_streams_aws.core.storage import CreateSpec, CreateStatus, Payload, Sealer, SealPolicy
from durable_streams_aws.core.storage.retention import RetentionReport
from durable_streams_aws.core.telemetry import Metric
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.lambda_bridge import function_url_event, lambda_environment

pytestmark = pytest.mark.integration

TEXT = [("content-type", "text/plain")]
TAIL = "0000000000000000_0000000000000009"  # after "hello" and "once"
JSON = "application/json"


def dimensions_of(records: list[dict[str, Any]], name: str) -> list[dict[str, str]]:
    """The dimension values of each EMF line that carries `name`."""
    found = []
    for record in records:
        if name not in record:
            continue
        keys = record["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]
        found.append({key: record[key] for key in keys})
    return found


def test_each_request_kind_emits_its_figures(emulator: Emulator) -> None:
    ensure_resources(build_backend(Settings(table="ops", bucket="ops-data"), emulator.endpoint))
    path = "/v1/stream/ops"
    producer = [*TEXT, ("producer-id", "p"), ("producer-epoch", "0"), ("producer-seq", "0")]
    events = [
        function_url_event("PUT", path, TEXT, b"", "::1"),
        function_url_event("POST", path, TEXT, b"hello", "::1"),
        function_url_event("POST", path, producer, b"once", "::1"),
        function_url_event("POST", path, producer, b"once", "::1"),  # the producer's retry
        function_url_event("GET", f"{path}?offset=-1", [], b"", "::1"),
        function_url_event("GET", f"{path}?offset={TAIL}&live=long-poll", [], b"", "::1"),
        function_url_event("HEAD", path, [], b"", "::1"),
        function_url_event("POST", path, [("content-type", "application/json")], b"{}", "::1"),
        function_url_event("DELETE", path, [], b"", "::1"),
    ]
    env = {
        **os.environ,
        **lambda_environment(emulator.endpoint, "ops", "ops-data"),
        "DS_LONG_POLL_TIMEOUT": "1",
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    answers, lines = invoke_function("durable_streams_aws.functions.api.handler", events, env)
    assert [a["statusCode"] for a in answers] == [201, 204, 200, 204, 200, 204, 200, 409, 204]
    records = emf_records(lines)
    for metric in (
        Metric.CREATE_LATENCY,
        Metric.CATCH_UP_LATENCY,
        Metric.LONG_POLL_LATENCY,
        Metric.HEAD_LATENCY,
        Metric.DELETE_LATENCY,
    ):
        assert len(values_of(records, metric.value)) == 1, metric
    assert len(values_of(records, Metric.APPEND_LATENCY.value)) == 4
    assert all(v >= 0 for v in values_of(records, Metric.APPEND_LATENCY.value))
    assert values_of(records, Metric.APPENDS.value) == [1.0, 1.0]
    assert values_of(records, Metric.APPENDS_DEDUPLICATED.value) == [1.0]
    assert values_of(records, Metric.BYTES_DEDUPLICATED.value) == [4.0]
    assert dimensions_of(records, Metric.APPENDS_REFUSED.value) == [
        {"service": "durable-streams", "Status": "409"}
    ]
    assert values_of(records, Metric.LONG_POLL_TIMEOUTS.value) == [1.0]
    reads = dimensions_of(records, Metric.ORIGIN_READS.value)
    # A read to the tail of an open stream is never kept; a long-poll's empty answer is,
    # for a second, for the readers collapsed behind it.
    assert [(r["Shape"], r["CacheControl"]) for r in reads] == [
        ("from-start", "no-store"),
        ("long-poll", "shared"),
    ]
    # Each answer names its request, and the access log line says the same id.
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    requests = [record for record in logged if record.get("message") == "request"]
    assert len(requests) == len(events)
    for answer, record in zip(answers, requests, strict=True):
        request_id = answer["headers"]["x-request-id"]
        assert request_id == record["request_id"] == record["function_request_id"]


def test_the_sealer_and_the_collector_report_their_runs(emulator: Emulator) -> None:
    table = bucket = "ops-background"
    backend = build_backend(Settings(table=table, bucket=bucket), endpoint=emulator.endpoint)
    ensure_resources(backend)
    env = {**os.environ, **lambda_environment(emulator.endpoint, table, bucket)}
    scheduled = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events"}
    answers, lines = invoke_function(
        "durable_streams_aws.functions.sealer.handler", [scheduled], env
    )
    records = emf_records(lines)
    for metric in (
        "SealMarksFound",
        "OldestSealMarkAge",
        "StreamsSealed",
        "BytesSealed",
        "SealFailures",
    ):
        assert values_of(records, metric) == [0.0], metric  # an idle run still reports
    answers, lines = invoke_function("durable_streams_aws.functions.gc.handler", [scheduled], env)
    assert answers[0]["incarnations_removed"] == 0
    records = emf_records(lines)
    for metric in ("IncarnationsCollected", "ObjectsCollected", "OrphansCollected"):
        assert values_of(records, metric) == [0.0], metric


def test_the_sealer_reports_its_retention_runs(emulator: Emulator) -> None:
    """The retention schedule's event (`{"job": "retention"}`): the run's report as the
    answer, and its figures as EMF metrics, an idle figure as 0."""
    table = bucket = "ops-retention"
    backend = build_backend(Settings(table=table, bucket=bucket), endpoint=emulator.endpoint)
    ensure_resources(backend)
    store = store_on(backend)
    compact, sized = RetentionPolicy(compact=True), RetentionPolicy(max_bytes=3000)
    for path, policy in (("state", compact), ("other", compact), ("sized", sized)):
        assert store.create(path, CreateSpec(JSON, retention=policy)).status is CreateStatus.CREATED

    def change(n: int, operation: str) -> bytes:
        row = {"type": "row", "key": f"k{n % 7}", "value": {"n": n}}
        return json.dumps({**row, "headers": {"operation": operation}}).encode()

    changes = [change(n, "insert" if n < 7 else "update") for n in range(40)]
    padded = [b'{"n":%d,"pad":"%s"}' % (n, b"x" * 40) for n in range(200)]
    for path, messages in (("state", changes), ("other", padded[:20]), ("sized", padded)):
        for at in range(0, len(messages), 10):
            batch = messages[at : at + 10]
            appended = store.append(
                path,
                AppendIntent(JSON, True, False),
                Payload(b"".join(batch), tuple(map(len, batch))),
            )
            assert appended.decision is not None and appended.decision.commits
        Sealer(store, SealPolicy(segment_bytes=2000, hot_bytes=0, page_bytes=500)).seal(path)
    env = {
        **os.environ,
        **lambda_environment(emulator.endpoint, table, bucket),
        "DS_RETENTION_DELAY": "0",  # a cut takes effect at once: the second run records it
        "DS_COMPACTION_MIN_BYTES": "1",
    }
    job = {"job": "retention"}
    answers, lines = invoke_function(
        "durable_streams_aws.functions.sealer.handler", [job, job], env
    )

    state, kept = store.get("state"), store.get("sized")
    assert state is not None and kept is not None
    snapshot = state.retained.snapshot
    assert snapshot is not None and state.retained.start == state.tail
    assert 0 < kept.retained.start <= kept.tail - 3000
    idle = {name: 0 for name in RetentionReport().as_dict()}
    assert answers == [
        {
            **idle,
            "streams_examined": 3,
            "cuts_announced": 2,  # the fold of "state", and "sized" by size
            "bytes_dropped": kept.retained.start,
            "streams_compacted": 1,
            "bytes_compacted": state.tail,
            "snapshot_bytes": snapshot.size,
            "compactions_refused": 1,  # "other" holds no State Protocol changes
        },
        {**idle, "streams_examined": 3, "cuts_recorded": 2},
    ]
    records = emf_records(lines)
    assert values_of(records, "RetentionCuts") == [2.0, 0.0]
    assert values_of(records, "BytesDropped") == [float(kept.retained.start), 0.0]
    assert values_of(records, "StreamsCompacted") == [1.0, 0.0]
    assert values_of(records, "BytesCompacted") == [float(state.tail), 0.0]
    assert values_of(records, "SnapshotBytes") == [float(snapshot.size), 0.0]
    assert values_of(records, "CompactionsRefused") == [1.0, 0.0]
    assert values_of(records, "RetentionFailures") == [0.0, 0.0]
    assert values_of(records, "StreamsSealed") == [], "a retention run is no sealing run"


_REFUSED_COLLECTION = """
from durable_streams_aws.core.storage import CollectionReport
from durable_streams_aws.functions import gc
from durable_streams_aws.functions.events import LambdaContext

class Refused:  # a run in which S3 refused to delete two objects
    def __init__(self, store):
        pass

    def run(self):
        return CollectionReport(objects_failed=2)

gc.Collector = Refused
try:
    gc.handler({"source": "aws.events"}, LambdaContext())
except gc.CollectionIncomplete as failed:
    print("FAILED", failed, flush=True)
"""


def test_a_collection_s3_refused_fails_its_run_after_reporting_it(emulator: Emulator) -> None:
    env = {**os.environ, **lambda_environment(emulator.endpoint, "ops-refused", "ops-refused")}
    run = subprocess.run(
        [sys.executable, "-c", _REFUSED_COLLECTION], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert any(line.startswith("FAILED S3 refused to delete 2 objects") for line in lines)
    assert values_of(emf_records(lines), "ObjectsNotCollected") == [2.0]
