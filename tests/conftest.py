from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from core.config import Settings
from core.runtime import Backend, build_backend, ensure_resources, use_emulator_credentials
from infra.emulator import Emulator


@pytest.fixture(scope="session")
def emulator() -> Iterator[Emulator]:
    use_emulator_credentials()
    with Emulator() as running:
        yield running


@pytest.fixture
def backend(emulator: Emulator) -> Backend:
    """A store on its own fresh table and bucket, so no test sees another's leftovers."""
    suffix = uuid.uuid4().hex[:12]
    settings = Settings(table=f"t-{suffix}", bucket=f"b-{suffix}", inline_max_bytes=1024)
    built = build_backend(settings, endpoint=emulator.endpoint)
    ensure_resources(built)
    return built
