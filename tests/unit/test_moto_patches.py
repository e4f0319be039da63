"""The registry of the emulator's patches of moto: each entry rebinds exactly the names it
says, names tests that exist, and none is installed on a moto version they were not tested
with."""

from __future__ import annotations

import ast
import importlib
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from emulator_support import patches_restored

from durable_streams_aws.infra.moto_patches import (
    PATCHES,
    TESTED_MOTO,
    UntestedMotoVersion,
    VersionRange,
    _registry,
    install_patches,
    uninstall_patches,
)

ROOT = Path(__file__).resolve().parents[2]
TESTED = ".".join(str(part) for part in TESTED_MOTO.lowest)


@pytest.fixture
def unpatched() -> Iterator[dict[str, object]]:
    """moto with no patch installed; what each patched name is bound to in moto itself."""
    with patches_restored():
        uninstall_patches()
        yield {name: value for patch in PATCHES for name, value in _bound(patch)}


def _bound(patch: _registry.MotoPatch) -> list[tuple[str, object]]:
    return list(zip(patch.replaces, patch.bound(), strict=True))


def _changed(moto_s: dict[str, object]) -> set[str]:
    now = {name: value for patch in PATCHES for name, value in _bound(patch)}
    return {name for name, value in now.items() if value is not moto_s[name]}


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("patch", PATCHES, ids=[patch.module for patch in PATCHES])
def test_every_patch_says_what_why_how_and_names_tests_that_exist(
    patch: _registry.MotoPatch,
) -> None:
    assert patch.replaces and patch.why and patch.checked_by
    module, _, function = patch.installer.rpartition(".")
    assert callable(getattr(importlib.import_module(module), function))
    for test in patch.checked_by:
        file, _, name = test.partition("::")
        assert (ROOT / file).is_file(), test
        assert name in _test_names(ROOT / file), test


@pytest.mark.parametrize("patch", PATCHES, ids=[patch.module for patch in PATCHES])
def test_each_patch_rebinds_exactly_the_names_it_lists(
    patch: _registry.MotoPatch, unpatched: dict[str, object]
) -> None:
    patch.install()
    assert _changed(unpatched) == set(patch.replaces)
    patch.uninstall()
    assert _changed(unpatched) == set()


def test_every_patch_is_installed_on_a_tested_moto(
    unpatched: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_registry, "installed_moto_version", lambda: TESTED)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert install_patches() is True
    assert _changed(unpatched) == {name for patch in PATCHES for name in patch.replaces}


@pytest.mark.parametrize("version", ["4.2.14", "5.3.0", "6.0.0", "not a version"])
def test_another_moto_is_warned_about_once_and_left_unpatched(
    version: str, unpatched: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_registry, "installed_moto_version", lambda: version)
    monkeypatch.setattr(_registry, "_warned", False)
    with pytest.warns(UntestedMotoVersion, match=f"moto {version} "):
        assert install_patches() is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert install_patches() is False  # no second warning
    assert _changed(unpatched) == set()


@pytest.mark.parametrize(
    ("version", "held"),
    [
        ("5.2.1", True),
        ("5.2.1.dev3", True),
        ("5.2.9", True),
        ("5.2", False),
        ("5.2.0", False),
        ("5.3", False),
        ("5.3.0rc1", False),
        ("4.9.9", False),
        ("", False),
        ("abc", False),
    ],
)
def test_a_version_range_compares_release_numbers(version: str, held: bool) -> None:
    assert (version in VersionRange(lowest=(5, 2, 1), below=(5, 3))) is held


def test_a_version_range_reads_as_a_requirement() -> None:
    assert str(VersionRange(lowest=(5, 2, 1), below=(5, 3))) == ">=5.2.1,<5.3"
