"""`benchmarks/producer.py` on a small workload: it runs end to end, checks what it wrote, and
prints one row per server, message size and producer, with the AWS calls where counted."""

from __future__ import annotations

import pytest

from benchmarks.producer import main

pytestmark = pytest.mark.integration


def test_the_producer_benchmark_runs_and_checks_its_streams(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--small", "300", "--large", "30", "--repeats", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| dsaws")]
    assert len(rows) == 8
    assert {row.split(" | ")[2] for row in rows} == {"ours", "typescript"}
    counted = [row for row in rows if "--aws" in row]
    assert len(counted) == 4 and all("TransactWriteItems" in row for row in counted)
