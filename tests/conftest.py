from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import remove_resources

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.infra.emulator import Emulator


@pytest.fixture(autouse=True)
def _data_dir_of_this_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `dsaws serve` a test starts without `--data-dir` keeps its data in this test's
    temporary directory, never in the user's."""
    monkeypatch.setenv("DSAWS_DATA_DIR", str(tmp_path / "dsaws-data"))


@pytest.fixture(scope="session")
def emulator() -> Iterator[Emulator]:
    use_emulator_credentials()
    with Emulator() as running:
        yield running


@pytest.fixture
def backend(emulator: Emulator) -> Iterator[Backend]:
    """A store on its own fresh table and bucket, so no test sees another's leftovers; both
    are removed afterwards (the session's emulator keeps everything in memory)."""
    suffix = uuid.uuid4().hex[:12]
    settings = Settings(table=f"t-{suffix}", bucket=f"b-{suffix}", inline_max_bytes=1024)
    built = build_backend(settings, endpoint=emulator.endpoint)
    ensure_resources(built)
    yield built
    remove_resources(built)
