"""`benchmarks/spark_pipeline.py` on a small workload, in the test run's Spark session: it runs
end to end, checks the rows each path handled, and prints one row per path."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.spark_pipeline import main

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_the_pipeline_benchmark_runs_and_checks_its_rows(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--messages", "2000", "--repeats", "1"], spark=spark) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    paths = [row.split(" | ")[0].removeprefix("| ") for row in rows[2:]]
    assert paths == ["read over HTTP", "read from the store (direct)", "written by the sink"]
    assert all(" | 2,000 | " in row for row in rows[2:])
