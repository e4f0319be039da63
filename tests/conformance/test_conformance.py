"""The official Durable Streams server conformance suite (npm), run against `dsaws serve`."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import boto3
import pytest
from auth_support import ALL_ACTIONS, KEY_SET_TEXT, ORIGIN_SECRET, bearer, token
from report import summarize
from support import ServerProcess

from durable_streams_aws.core.auth import ORIGIN_SECRET_HEADER
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.local_cdn import install_nginx
from interop import CACHE, NodeMissing, install_node_project

HERE = Path(__file__).resolve().parent
CORE_TESTS = 217  # every active test that involves neither SSE nor forks
ALL_ACTIVE_TESTS = 338  # every test of 0.3.6, the 6 opt-in subscription tests included

pytestmark = pytest.mark.conformance


def _install_suite() -> Path:
    """The pinned suite, installed from package-lock.json (again only when the lock changes)."""
    try:
        return install_node_project(HERE / "npm", CACHE / "conformance")
    except NodeMissing as missing:
        pytest.fail(f"the conformance suite needs Node 20: {missing}")


def run_suite(
    base_url: str, report: Path, headers: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    work = _install_suite()
    env = {
        **os.environ,
        "CONFORMANCE_TEST_URL": base_url,
        "CONFORMANCE_HEADERS": json.dumps(headers or {}),
        "CONFORMANCE_REPORT": str(report),
        "CONFORMANCE_LONG_POLL_MS": "1000",
        "FORCE_COLOR": "0",
    }
    vitest = work / "node_modules" / ".bin" / "vitest"
    return subprocess.run(
        [str(vitest), "run", "--config", "vitest.config.mjs"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def check_full_suite(
    server: ServerProcess, report: Path, label: str, headers: dict[str, str] | None = None
) -> None:
    with server:
        run = run_suite(server.cdn_url or server.base_url, report, headers)
        server_log = server.log()
    assert report.exists(), run.stdout[-4000:] + run.stderr[-4000:]
    everything = summarize(report)
    core = summarize(report, core_only=True)
    print(
        f"\nconformance {label}: {len(everything.passed)} passed, "
        f"{len(everything.failed)} failed of {everything.active} active "
        f"({everything.skipped} skipped); without SSE/forks: {len(core.passed)} of {core.active}"
    )
    for failure in everything.failed:
        print("FAILED:", failure)
    if everything.failed:
        print(f"the server's last output:\n{server_log}")
    assert everything.failed == []
    assert everything.active == ALL_ACTIVE_TESTS
    assert core.active == CORE_TESTS


def test_conformance_under_uvicorn_with_auth(tmp_path: Path) -> None:
    """`dsaws serve --auth`: every request of the suite carries a token that may do anything,
    and every read is a token read (answered `private`)."""
    # The suite's webhook receivers listen on http://127.0.0.1, which a server with access
    # control refuses unless told otherwise.
    env = {"DS_AUTH_SECRET": KEY_SET_TEXT, "DS_WEBHOOK_ALLOW_LOCALHOST": "true"}
    server = ServerProcess("--long-poll-timeout", "1", "--auth", env=env)
    label = "under uvicorn (dsaws serve --auth, token reads)"
    check_full_suite(server, tmp_path / "report.json", label, bearer(token(f"{ALL_ACTIONS}:*")))


def test_conformance_while_sealing_aggressively(tmp_path: Path, emulator: Emulator) -> None:
    """Every stream is marked on every commit and sealed within 50 ms into segments of a few
    hundred bytes with pages of 64, which are grown (replaced) again and again: reads run
    into segments, leftover chunks and stale caches all the time. Every stream has a
    retention policy (a day: nothing is dropped, but each create lists its stream and
    retention runs every 50 ms beside the sealer). The server runs on the session's emulator
    so the test can count the segments afterwards."""
    table = bucket = f"conformance-sealing-{uuid.uuid4().hex[:8]}"
    sealing = {
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "DS_SEAL_INTERVAL": "0.05",
        "DS_SEAL_HOT_BYTES": "0",
        "DS_SEGMENT_BYTES": "300",
        "DS_SEAL_PAGE_BYTES": "64",
        "DS_RETENTION_DEFAULTS": "=max-age=86400",
        "DS_RETENTION_INTERVAL": "0.05",
    }
    args = ("--aws", "--table", table, "--bucket", bucket, "--long-poll-timeout", "1")
    server = ServerProcess(*args, env=sealing)
    check_full_suite(server, tmp_path / "report.json", "while sealing every 50 ms")
    dynamodb = boto3.client("dynamodb", endpoint_url=emulator.endpoint, region_name="us-east-1")
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=table, FilterExpression="attribute_exists(pg)", Select="COUNT"
    )
    segments = sum(page["Count"] for page in pages)
    print(f"segments sealed during the suite and still live: {segments}")
    assert segments > 100


def test_conformance_on_dynamodb_local(tmp_path: Path, dynamodb_local_installed: None) -> None:
    """`dsaws serve --dynamodb-local`: the tables on Amazon's DynamoDB Local (its own
    validation and expression parser), S3 on the embedded emulator."""
    server = ServerProcess("--dynamodb-local", "--in-memory", "--long-poll-timeout", "1")
    check_full_suite(server, tmp_path / "report.json", "on DynamoDB Local")


def test_conformance_through_the_lambda_handler(tmp_path: Path) -> None:
    """functions.api.handler behind Function URL events, SSE in bounded-window mode, configured
    as the template deploys it: access control on with every stream publicly readable (writes
    carry a token), and the origin locked (requests carry the CDN's origin secret)."""
    deployed = {
        "DS_AUTH": "true",
        "DS_AUTH_SECRET": KEY_SET_TEXT,
        "DS_PUBLIC_READ_PREFIXES": "*",
        "DS_ORIGIN_LOCK": "all",
        "DS_ORIGIN_SECRET": ORIGIN_SECRET,
        # The suite's webhook receivers listen on http://127.0.0.1 (a deployment refuses it).
        "DS_WEBHOOK_ALLOW_LOCALHOST": "true",
    }
    server = ServerProcess(
        "--long-poll-timeout", "1", module="durable_streams_aws.infra.lambda_bridge", env=deployed
    )
    headers = {**bearer(token(f"{ALL_ACTIONS}:*")), ORIGIN_SECRET_HEADER: ORIGIN_SECRET}
    label = "through the Lambda bridge (auth on, public reads, origin locked)"
    check_full_suite(server, tmp_path / "report.json", label, headers)


def test_conformance_through_the_local_cdn(tmp_path: Path) -> None:
    """Every request through nginx configured like the CloudFront distribution: caching and
    collapsing must not break any protocol rule."""
    install_nginx()
    server = ServerProcess("--long-poll-timeout", "1", with_cdn=True)
    check_full_suite(server, tmp_path / "report.json", "through the local CDN (nginx)")
