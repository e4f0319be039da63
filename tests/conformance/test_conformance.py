"""The official Durable Streams server conformance suite (npm), run against `dsaws serve`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from report import summarize
from support import ServerProcess

HERE = Path(__file__).resolve().parent
CORE_TESTS = 211  # every active test that involves neither SSE nor forks
ALL_ACTIVE_TESTS = 332  # 338 in 0.3.6, less the 6 opt-in subscription tests

pytestmark = pytest.mark.conformance


def _install_suite() -> None:
    """Install the pinned suite from package-lock.json unless it is already there."""
    marker = HERE / "node_modules" / "@durable-streams" / "server-conformance-tests"
    if marker.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed for the conformance suite (Node 20)")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)


def run_suite(base_url: str, report: Path) -> subprocess.CompletedProcess[str]:
    _install_suite()
    env = {
        **os.environ,
        "CONFORMANCE_TEST_URL": base_url,
        "CONFORMANCE_REPORT": str(report),
        "CONFORMANCE_LONG_POLL_MS": "1000",
        "FORCE_COLOR": "0",
    }
    vitest = HERE / "node_modules" / ".bin" / "vitest"
    return subprocess.run(
        [str(vitest), "run", "--config", "vitest.config.mjs"],
        cwd=HERE,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_conformance_full_protocol(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    with ServerProcess("--long-poll-timeout", "1") as server:
        run = run_suite(server.base_url, report)
    assert report.exists(), run.stdout[-4000:] + run.stderr[-4000:]
    everything = summarize(report)
    core = summarize(report, core_only=True)
    print(
        f"\nconformance under uvicorn: {len(everything.passed)} passed, "
        f"{len(everything.failed)} failed of {everything.active} active "
        f"({everything.skipped} skipped); without SSE/forks: {len(core.passed)} of {core.active}"
    )
    assert everything.failed == []
    assert everything.active == ALL_ACTIVE_TESTS
    assert core.active == CORE_TESTS
