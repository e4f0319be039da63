"""The layers and package boundaries (docs/architecture.md, "The layers") hold: import-linter
checks the contracts in pyproject.toml ([tool.importlinter]) against the imports of the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("core", "functions", "infra", "pipeline")
# import-linter's API in a process of its own: it puts the working directory on sys.path.
_LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))"
)


def test_imports_keep_the_contracts() -> None:
    run = subprocess.run(
        [sys.executable, "-c", _LINT, str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report
    # Contracts over an empty graph would hold too: every module of the repository was read.
    analyzed = re.search(r"Analyzed (\d+) files", report)
    assert analyzed is not None, report
    modules = sum(len(list((ROOT / folder).rglob("*.py"))) for folder in PACKAGE_FOLDERS)
    assert int(analyzed[1]) >= modules, report
