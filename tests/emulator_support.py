"""What the tests of the emulator's fast paths share: the fast paths, switched on and off
together, and a DynamoDB client answered in-process by the emulator."""

from __future__ import annotations

from typing import Any

from durable_streams_aws.core.runtime import use_emulator_credentials
from durable_streams_aws.core.storage.aws import AwsSettings, make_clients
from durable_streams_aws.infra import (
    _fast_item_requests,
    _moto_fast_dispatch,
    _moto_fast_expressions,
    _moto_fast_query,
    _moto_fast_serialize,
)
from durable_streams_aws.infra.emulator import IN_PROCESS_ENDPOINT, Emulator

FAST_PATHS = (
    _moto_fast_serialize,
    _moto_fast_query,
    _moto_fast_expressions,
    _moto_fast_dispatch,
    _fast_item_requests,
)


def use_fast_paths(on: bool) -> None:
    """Every fast path on, or every one off (moto's own code alone)."""
    for patch in FAST_PATHS:
        (patch.install if on else patch.uninstall)()


def in_process_dynamodb() -> Any:
    """A DynamoDB client whose requests a new in-process emulator answers."""
    use_emulator_credentials()
    settings = AwsSettings(
        region="us-east-1", dynamodb_endpoint=IN_PROCESS_ENDPOINT, s3_endpoint=IN_PROCESS_ENDPOINT
    )
    client, _ = make_clients(settings)
    return Emulator().connect(client)
