"""`benchmarks/compaction.py` in quick mode: it runs end to end against `dsaws serve --aws`,
the state a new reader materializes equals the rows written before compaction and after (the
benchmark checks that itself), and both of its targets are printed as passed."""

from __future__ import annotations

import pytest

from benchmarks.compaction import main

pytestmark = pytest.mark.integration


def test_quick_mode_meets_both_targets(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["--quick"])
    out = capsys.readouterr().out
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert status == 0 and len(verdicts) == 2, out
    assert all(line.startswith("PASS") for line in verdicts), out
    assert "| rows materialized | 600 | 600 |" in out
    assert "| retention run 2 |" in out and "| collector |" in out
