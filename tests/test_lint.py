"""The code is formatted and linted as part of the test suite, so CI enforces it."""

from __future__ import annotations

import ast
import re
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


# What the repository's folders are installed as (pyproject.toml, [tool.setuptools.package-dir]).
# The client is core/client's own package, not a part of durable_streams_aws.core.
PACKAGE_OF_FOLDER = {
    "core/client": "durable_streams_aws.client",
    "core": "durable_streams_aws.core",
    "functions": "durable_streams_aws.functions",
    "infra": "durable_streams_aws.infra",
    "pipeline": "durable_streams_aws.pipeline",
}
OLD_NAMES = ("core", "functions", "infra", "pipeline")
SKIPPED_FOLDERS = {"node_modules", "build", "__pycache__"}
# A module name written in a string (`python -m core.cli`, a handler, a monkeypatch target).
_MODULE_STRING = re.compile(r"(core|functions|infra|pipeline)(\.\w+)+(:\w+)?( [\w-]+)*")
# Code held in a string (run with -c, or by a subprocess).
_IMPORT_IN_STRING = re.compile(r"^\s*(from|import)\s+(core|functions|infra|pipeline)\b", re.M)


def _python_files() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not any(
            part in SKIPPED_FOLDERS or part.startswith(".")
            for part in path.relative_to(ROOT).parts[:-1]
        )
    )


def _module_name(path: Path) -> tuple[str, bool]:
    """The name the file is imported as, and whether it is a package's __init__."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    dotted = "/".join(parts)
    for folder, package in PACKAGE_OF_FOLDER.items():  # core/client before core
        if dotted == folder or dotted.startswith(folder + "/"):
            rest = dotted[len(folder) :].strip("/")
            return ".".join(filter(None, [package, *rest.split("/")])), is_package
    return ".".join(parts), is_package


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module the file imports, as an absolute name (relative imports resolved as they
    resolve once installed), with its line."""
    name, is_package = _module_name(path)
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def test_nothing_imports_the_old_top_level_names() -> None:
    """Each module is imported under its installed name only: a module imported under two
    names is two modules (two classes for isinstance, two copies of its state). The repository
    root is on sys.path in the tests (pytest's pythonpath), so `core` would still import here."""
    wrong = []
    for path in _python_files():
        where = path.relative_to(ROOT)
        for line, module in _imports(path):
            if module.split(".")[0] in OLD_NAMES:
                wrong.append(f"{where}:{line}: {module}")
            if module.startswith("durable_streams_aws.core.client"):
                wrong.append(f"{where}:{line}: {module} (the client is durable_streams_aws.client)")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if _MODULE_STRING.fullmatch(text) or _IMPORT_IN_STRING.search(text):
                    wrong.append(f"{where}:{node.lineno}: {text[:60]!r}")
    template = (ROOT / "template.yaml").read_text()
    for handler in re.findall(r"^\s*Handler:\s*(\S+)", template, re.M):
        if not handler.startswith("durable_streams_aws."):
            wrong.append(f"template.yaml: Handler: {handler}")
    assert not wrong, "old module names:\n" + "\n".join(wrong)


def test_the_client_imports_only_itself_httpx_and_the_standard_library() -> None:
    """It installs alone with httpx (core/client/pyproject.toml)."""
    wrong = []
    for path in sorted((ROOT / "core" / "client").glob("*.py")):
        for line, module in _imports(path):
            top = module.split(".")[0]
            if module.startswith("durable_streams_aws."):
                if not module.startswith("durable_streams_aws.client"):
                    wrong.append(f"{path.name}:{line}: {module}")
            elif top not in sys.stdlib_module_names and top not in ("httpx", "__future__"):
                wrong.append(f"{path.name}:{line}: {module}")
    assert not wrong, "\n".join(wrong)
