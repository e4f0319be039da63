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
    cells = [row.split(" | ") for row in rows]
    assert [cell[2] for cell in cells] == ["ahead", "one by one"] * 4
    assert [cell[1] for cell in cells] == (
        ["as written"] * 2 + ["sealed but its newest 256 KiB"] * 2
    ) * 2
    assert all("GetObject 4" in row for row in rows[0::4] + rows[1::4])  # an object per append
    # Sealed, the same calls either way: reading ahead makes some of them at once.
    for ahead, one_by_one in zip(cells[2::4], cells[3::4], strict=True):
        assert ahead[-1] == one_by_one[-1] and "GetObject" in ahead[-1]
