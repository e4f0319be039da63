"""The code is formatted and linted as part of the test suite, so CI enforces it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_and_format() -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        run = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stdout + run.stderr
