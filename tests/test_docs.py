"""The documentation stays true to the code: the README's first lines are the commands CI runs,
every setting and template parameter is documented, and every relative link leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from durable_streams_aws.core.config import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SETTINGS_DOC = DOCS / "running-locally.md"
DEPLOY_DOC = DOCS / "deploying.md"
CODE_FOLDERS = ("core", "functions", "infra", "pipeline")

# A fresh machine starts the server with the first and runs the whole suite with the second;
# .ci/run runs that same test command.
FIRST_LINES = (
    "# durable-streams-aws\n"
    "\n"
    "```sh\n"
    "python3 -m pip install -e '.[local]' && dsaws serve        "
    "# start the server on the embedded emulator\n"
    "python3 -m pip install -e '.[dev]' && python3 -m pytest    # run the whole test suite\n"
    "```\n"
)

# A repository path written in backticks: `core/storage/dynamo.py`, `infra/moto_patches/_*.py`.
_REPOSITORY_PATH = re.compile(
    r"`((?:core|functions|infra|pipeline|interop|tests|benchmarks|docs)/[\w./*-]*)`"
)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _documents() -> list[Path]:
    return [README, ROOT / "benchmarks" / "README.md", *sorted(DOCS.glob("*.md"))]


def _section(text: str, heading: str) -> str:
    """The text under `heading` (a `## ` line), up to the next heading of its level."""
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _table_names(section: str, pattern: str) -> set[str]:
    """Names in the first column of a Markdown table's rows."""
    rows = (line.split("|")[1] for line in section.splitlines() if line.startswith("| `"))
    return {name for row in rows for name in re.findall(pattern, row)}


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text())
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = _anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def test_readme_starts_with_the_two_commands() -> None:
    assert README.read_text().startswith(FIRST_LINES)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-2:] == ["python3 -m pip install --quiet -e '.[dev]'", "python3 -m pytest"]


def test_every_setting_is_in_the_settings_table() -> None:
    table = _table_names(_section(SETTINGS_DOC.read_text(), "## Settings"), r"DS_[A-Z_]+")
    fields = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    assert fields - table == set(), "settings missing from docs/running-locally.md"
    # A few variables are read where they act (DS_TRACING by the Lambda handler), not by Settings.
    read_elsewhere = {name for name in table - fields if _read_by_the_code(name)}
    assert table - fields - read_elsewhere == set(), "documented settings that do not exist"


def _read_by_the_code(name: str) -> bool:
    sources = (p for folder in CODE_FOLDERS for p in (ROOT / folder).rglob("*.py"))
    return any(f'"{name}"' in source.read_text() for source in sources)


def test_every_template_parameter_is_documented() -> None:
    template = (ROOT / "template.yaml").read_text()
    block = template.split("\nParameters:\n", 1)[1]
    block = re.split(r"^\S", block, maxsplit=1, flags=re.M)[0]  # up to the next top-level key
    parameters = set(re.findall(r"^  (\w+):", block, re.M))
    table = _table_names(DEPLOY_DOC.read_text(), r"`(\w+)`")
    assert len(parameters) > 20
    assert parameters - table == set(), "template parameters missing from docs/deploying.md"


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(document: Path) -> None:
    targets = _LINK.findall(_FENCE.sub("", document.read_text()))
    broken = [target for target in targets if not _resolves(document, target)]
    assert broken == []


def _resolves(document: Path, target: str) -> bool:
    if re.match(r"[a-z]+:", target):
        return True  # an absolute URL
    path_part, _, anchor = target.partition("#")
    linked = (document.parent / path_part).resolve() if path_part else document
    if not linked.exists():
        return False
    return not anchor or linked.suffix != ".md" or anchor in _anchors(linked)


@pytest.mark.parametrize("document", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_paths_named_exist(document: Path) -> None:
    """A file moved or renamed takes its documentation along."""
    text = document.read_text()
    missing = [path for path in _REPOSITORY_PATH.findall(text) if not any(ROOT.glob(path))]
    assert missing == []
