"""What the tests of the emulator's fast paths share: the fast paths, switched on and off
together, and a DynamoDB client answered in-process by the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from durable_streams_aws.core.runtime import use_emulator_credentials
from durable_streams_aws.core.storage.aws import AwsSettings, make_clients
from durable_streams_aws.infra.emulator import IN_PROCESS_ENDPOINT, Emulator
from durable_streams_aws.infra.moto_patches import PATCHES

# Every patch but the cheaper transactions, which these comparisons never switched off
# (tests/integration/test_emulator.py checks that one).
FAST_PATHS = tuple(patch for patch in PATCHES if patch.module != "_transactions")


def use_fast_paths(on: bool) -> None:
    """Every fast path on, or every one off (moto's own code alone)."""
    for patch in FAST_PATHS:
        (patch.install if on else patch.uninstall)()


@contextmanager
def patches_restored() -> Iterator[None]:
    """Each patch of moto installed afterwards if and only if it was before."""
    before = {patch: patch.bound() for patch in PATCHES}
    try:
        yield
    finally:
        for patch in PATCHES:
            patch.uninstall()
            if patch.bound() != before[patch]:
                patch.install()


def in_process_dynamodb() -> Any:
    """A DynamoDB client whose requests a new in-process emulator answers."""
    use_emulator_credentials()
    settings = AwsSettings(
        region="us-east-1", dynamodb_endpoint=IN_PROCESS_ENDPOINT, s3_endpoint=IN_PROCESS_ENDPOINT
    )
    client, _ = make_clients(settings)
    return Emulator().connect(client)
