"""`benchmarks/read_ahead.py` on a small history: it runs end to end against the emulator in a
process of its own (checking every read against what was written) and prints its rows."""

from __future__ import annotations

import pytest

from benchmarks.read_ahead import main

pytestmark = pytest.mark.integration


def test_the_read_ahead_benchmark_runs_and_checks_its_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--appends", "4", "--per-append", "1000", "--repeats", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][2:]
    assert [row.split(" | ")[1] for row in rows] == ["ahead", "one by one"] * 2
    assert all("GetObject 4" in row for row in rows)  # an object per append, either way
