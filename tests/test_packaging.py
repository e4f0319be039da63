"""What installing the project puts into an environment: one top-level name,
`durable_streams_aws`, from either distribution (the whole project at the repository's root,
the client alone from core/client), and nothing but httpx with the client. The wheels are built
from a copy of the sources, so that the builds leave nothing in the repository."""

from __future__ import annotations

import email
import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "core" / "client"
# The folders the whole project installs (pyproject.toml, [tool.setuptools.package-dir]).
FOLDERS = {"core": "core", "functions": "functions", "infra": "infra", "pipeline": "pipeline"}
_IGNORED = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "node_modules")


def _build(source: Path, out: Path) -> Path:
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), "."],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("packaging")
    project = work / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, project / folder, ignore=_IGNORED)
    client = work / "client"
    shutil.copytree(CLIENT, client, ignore=_IGNORED)
    return {
        "project": _build(project, work / "project-wheel"),
        "client": _build(client, work / "client-wheel"),
    }


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.message_from_bytes(wheel.read(name))


def _top_level(wheel: zipfile.ZipFile) -> set[str]:
    return {name.split("/")[0] for name in wheel.namelist()}


def _sources(folder: Path) -> set[str]:
    relative = (p.relative_to(folder) for p in folder.rglob("*.py"))
    return {p.as_posix() for p in relative if "build" not in p.parts}


def test_the_whole_project_installs_one_name_with_every_module(wheels: dict[str, Path]) -> None:
    with zipfile.ZipFile(wheels["project"]) as wheel:
        names = set(wheel.namelist())
        assert _top_level(wheel) == {"durable_streams_aws", "durable_streams_aws-0.1.0.dist-info"}
        entry_points = wheel.read("durable_streams_aws-0.1.0.dist-info/entry_points.txt").decode()
    # A namespace package: the client's distribution contributes to it too.
    assert "durable_streams_aws/__init__.py" not in names
    assert "dsaws = durable_streams_aws.core.cli:main" in entry_points
    packaged = {n for n in names if n.endswith(".py")}
    expected = {f"durable_streams_aws/client/{p}" for p in _sources(CLIENT)}
    for folder, package in FOLDERS.items():
        expected |= {
            f"durable_streams_aws/{package}/{p}"
            for p in _sources(ROOT / folder)
            if not (folder == "core" and p.startswith("client/"))
        }
    assert packaged == expected  # every module (a package missing from the list is caught)
    # The console's page and assets, served from the package (no build step, no fetch).
    static = ROOT / "core" / "console" / "static"
    shipped = {p.relative_to(static).as_posix() for p in static.rglob("*") if p.is_file()}
    assert (
        shipped
        and {
            n.removeprefix("durable_streams_aws/core/console/static/")
            for n in names
            if n.startswith("durable_streams_aws/core/console/static/")
        }
        == shipped
    )


def test_the_client_alone_needs_only_httpx(wheels: dict[str, Path]) -> None:
    with zipfile.ZipFile(wheels["client"]) as wheel:
        assert _top_level(wheel) == {
            "durable_streams_aws",
            "durable_streams_aws_client-0.1.0.dist-info",
        }
        packaged = {n for n in wheel.namelist() if n.endswith(".py")}
        requirements = [Requirement(r) for r in _metadata(wheel).get_all("Requires-Dist") or []]
        entry_points = wheel.read(
            "durable_streams_aws_client-0.1.0.dist-info/entry_points.txt"
        ).decode()
    assert packaged == {f"durable_streams_aws/client/{p}" for p in _sources(CLIENT)}
    assert [r.name for r in requirements] == ["httpx"]
    # The docs present the stream commands as the client's: installed alone, it has them.
    assert "dsaws = durable_streams_aws.client.commands:main" in entry_points


def test_both_distributions_have_the_same_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    client = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert client["version"] == project["version"]
    assert project["name"] == "durable-streams-aws"
    assert client["name"] == "durable-streams-aws-client"


def _closure(names: list[str]) -> set[str]:
    """The distributions `names` need, as installed here (extras left out)."""
    seen: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return seen


def test_the_client_imports_with_nothing_but_httpx(wheels: dict[str, Path], tmp_path: Path) -> None:
    """The client's wheel, httpx and what httpx needs, and no site-packages (-S): every module of
    the client imports, and nothing of the rest of the project is there to be found."""
    installed = tmp_path / "site"
    with zipfile.ZipFile(wheels["client"]) as wheel:
        wheel.extractall(installed)
    for name in _closure(["httpx"]):
        distribution = importlib.metadata.distribution(name)
        for file in distribution.files or []:
            source = Path(str(distribution.locate_file(file)))
            if source.is_file() and ".." not in file.parts:
                target = installed / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)
    check = f"""
import importlib, pkgutil, sys
sys.path[:0] = [{str(installed)!r}]
import durable_streams_aws.client as client
assert client.__file__.startswith({str(installed)!r}), client.__file__
for module in pkgutil.iter_modules(client.__path__):
    importlib.import_module("durable_streams_aws.client." + module.name)
from durable_streams_aws.client import DurableStream, IdempotentProducer, Offset
for name in ("durable_streams_aws.core", "fastapi", "boto3", "pydantic"):
    assert importlib.util.find_spec(name) is None, name
from durable_streams_aws.client.commands import main
try:
    main(["--help"])
except SystemExit as exit:
    assert exit.code == 0, exit.code
"""
    run = subprocess.run(
        [sys.executable, "-S", "-c", check], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for command in ("create", "append", "read", "tail", "head", "close", "delete", "fork"):
        assert command in run.stdout
