"""The documentation stays true to the code: the README's first lines are the commands CI runs,
every setting and template parameter is documented with the default each entry point really
uses, the facts the documents state about the code are the code's, and every relative link
leads somewhere. (tests/test_examples.py runs their examples.)"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable_streams_aws.client import commands as stream_commands
from durable_streams_aws.core.cdn.policy import KEY_HEADERS, KEY_QUERY_PARAMETERS
from durable_streams_aws.core.cli import build_parser, serve_settings
from durable_streams_aws.core.config import ENV_PREFIX, Settings, load_settings
from durable_streams_aws.core.runtime import seal_policy
from durable_streams_aws.core.serving import EMBEDDED_PAGE_ITEMS

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


# The settings whose documented default is what they come to, not the field's own value.
_EFFECTIVE: dict[str, Callable[[Settings], Any]] = {
    "segment_bytes": lambda s: seal_policy(s).segment_bytes,
    "seal_hot_bytes": lambda s: seal_policy(s).hot_bytes,
    "seal_page_bytes": lambda s: seal_policy(s).page_bytes,
    "sse_window": lambda s: s.sse_window_seconds,
    "cache_timeout_stale_while_revalidate": lambda s: s.cache_timeout_stale_seconds,
    "webhook_allow_localhost": lambda s: s.webhook_localhost_allowed,
}
# Defaults stated in words, and what each comes to.
_PHRASES: dict[str, Callable[[Settings], Any]] = {
    "unset": lambda s: None,
    "empty": lambda s: "",
    "the long-poll timeout": lambda s: s.long_poll_timeout,
    "the long-poll timeout, rounded up": lambda s: math.ceil(s.long_poll_timeout),
    "`DS_MAX_READ_BYTES` \u2212 64": lambda s: s.max_read_bytes - 64,
}
_HOST_NOTE = re.compile(r"(?P<value>`[^`]+`|empty) (?P<host>inside Lambda|under `dsaws serve`.*)")
_TEMPLATE_NOTE = re.compile(r"the template sets (?P<value>\S+)")


def _settings_rows() -> list[tuple[list[str], str]]:
    """The settings table: each row's variables and its default cell."""
    section = _section(SETTINGS_DOC.read_text(), "## Settings")
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    return [(re.findall(r"DS_[A-Z_]+", row[0]), row[1]) for row in rows]


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> dict[str, Settings]:
    """The settings each entry point runs with when no variable is set: `dsaws serve`'s, and
    the Lambda function's (functions/api.py builds its backend from `load_settings()`)."""
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX) or name == "AWS_LAMBDA_FUNCTION_NAME":
            monkeypatch.delenv(name)
    serve = serve_settings(build_parser().parse_args(["serve"]))
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "durable-streams-api")
    return {"serve": serve, "lambda": load_settings()}


def _stated(text: str, settings: Settings) -> Any:
    literal = re.fullmatch(r"`([^`]+)`", text)
    if literal:
        return literal[1]
    assert text in _PHRASES, f"a default the test cannot check: {text!r} (add it to _PHRASES)"
    return _PHRASES[text](settings)


def _same(value: Any, stated: Any) -> bool:
    if isinstance(stated, str) and not isinstance(value, str) and value is not None:
        if isinstance(value, bool):
            return stated == str(value).lower()
        return float(stated) == value
    return bool(value == stated)


def test_settings_defaults_are_what_each_entry_point_uses(
    entry_points: dict[str, Settings],
) -> None:
    wrong = []
    for names, cell in _settings_rows():
        fields = [n.removeprefix(ENV_PREFIX).lower() for n in names]
        if not all(field in Settings.model_fields for field in fields):
            continue  # read where it acts (DS_TRACING, by the Lambda handler)
        main, _, note = cell.partition(" (")
        note = note.removesuffix(")")
        host_note = _HOST_NOTE.fullmatch(note)
        template_note = _TEMPLATE_NOTE.fullmatch(note)
        assert not note or host_note or template_note, f"{names}: unknown note {note!r}"
        for host, settings in entry_points.items():
            stated_text = main
            if host_note and (host == "lambda") == (host_note["host"] == "inside Lambda"):
                stated_text = host_note["value"]
            stated = _stated(stated_text, settings)
            for field in fields:
                value = _EFFECTIVE.get(field, lambda s, f=field: getattr(s, f))(settings)
                if not _same(value, stated):
                    wrong.append(
                        f"{ENV_PREFIX}{field.upper()} under {host}: {value!r}, not {stated!r}"
                    )
        if template_note:
            for name in names:
                set_to = _template_environment().get(name)
                if set_to != template_note["value"]:
                    wrong.append(f"{name}: the template sets {set_to!r}")
    assert wrong == []


def _template_parameters() -> dict[str, str]:
    """Each template parameter's default (quotes removed), "" for none."""
    template = (ROOT / "template.yaml").read_text()
    block = template.split("\nParameters:\n", 1)[1]
    block = re.split(r"^\S", block, maxsplit=1, flags=re.M)[0]
    defaults = {}
    for found in re.finditer(r"^  (\w+):\n((?:    .*\n|\s*\n)*)", block, re.M):
        default = re.search(r"^    Default: ?(.*)$", found[2], re.M)
        defaults[found[1]] = default[1].strip().strip('"') if default else ""
    return defaults


def _template_environment() -> dict[str, str]:
    """The DS_ variables the template sets, a parameter's default for a reference to one."""
    template = (ROOT / "template.yaml").read_text()
    parameters = _template_parameters()
    found = {}
    for name, value in re.findall(r"^\s+(DS_[A-Z_]+): (.+)$", template, re.M):
        reference = re.fullmatch(r"!Ref (\w+)", value.strip())
        if reference and reference[1] in parameters:
            value = parameters[reference[1]]
        found.setdefault(name, value.strip().strip('"'))
    return found


def test_template_parameter_defaults_are_the_templates() -> None:
    defaults = _template_parameters()
    wrong = []
    for line in DEPLOY_DOC.read_text().splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `") or len(cells) < 3:
            continue
        stated = cells[1].strip()
        stated = "" if stated in ("empty", "(empty)") or stated.startswith("(empty:") else stated
        for name in re.findall(r"`(\w+)`", cells[0]):
            if name in defaults and defaults[name] != stated:
                wrong.append(f"{name}: the table says {stated!r}, the template {defaults[name]!r}")
    assert wrong == []


def test_the_cdn_cache_key_is_the_policys() -> None:
    text = (DOCS / "cdn.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| cache key |"))
    listed = row.split(" | ")[1]
    parameters = re.search(r"query parameters (.*?), headers? ", listed)
    headers = re.search(r"headers? (.*?), no cookies", listed)
    assert parameters and headers, listed
    assert sorted(re.findall(r"`([\w-]+)`", parameters[1])) == sorted(KEY_QUERY_PARAMETERS)
    assert sorted(re.findall(r"`([\w-]+)`", headers[1])) == sorted(KEY_HEADERS)


def test_the_exit_statuses_are_the_commands() -> None:
    text = " ".join((DOCS / "client.md").read_text().split())
    sentence = re.search(r"Exit statuses: (.*?)\.", text)
    assert sentence
    documented = {int(n) for n in re.findall(r"(?:^|, )(\d+) ", sentence[1])}
    codes = {v for k, v in vars(stream_commands).items() if k.startswith("EXIT_")}
    assert documented == codes | {0, 2}  # done, and argparse's usage errors


def test_the_sealers_page_on_the_emulator_is_the_codes() -> None:
    for name in ("storage.md", "running-locally.md"):
        text = " ".join((DOCS / name).read_text().split())
        stated = re.findall(r"(\d+) chunk items|pages of (\d+) chunks", text)
        assert stated, name
        assert {int(a or b) for a, b in stated} == {EMBEDDED_PAGE_ITEMS}, name


def test_one_variable_holds_the_command_lines_token(monkeypatch: pytest.MonkeyPatch) -> None:
    variable = stream_commands.TOKEN_VARIABLE
    named = {
        name
        for document in _documents()
        for name in re.findall(r"\b(DS_TOKEN|DSAWS_TOKEN|\w*_TOKEN)\b", document.read_text())
    }
    assert named <= {variable}, named
    monkeypatch.setenv(variable, "the-token")
    monkeypatch.setenv("DS_TOKEN", "another")
    smoke = build_parser().parse_args(["smoke", "--url", "http://x"])
    assert smoke.token == "the-token"
