"""Wiring: settings -> AWS clients -> store -> app."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from .app import create_app
from .config import Settings
from .storage import DynamoStore, SealPolicy
from .storage.aws import AwsSettings, make_clients
from .storage.bootstrap import ensure_bucket, ensure_table
from .telemetry import Telemetry

if TYPE_CHECKING:
    from .storage.retention import RetentionRun

EMULATOR_REGION = "us-east-1"
# What a sealed page leaves of a read response: the JSON array's brackets, and some room.
_PAGE_ROOM = 64


@dataclass
class Backend:
    settings: Settings
    dynamodb: Any
    s3: Any
    store: DynamoStore

    telemetry: Telemetry | None = None
    # The store answers in this process, without waiting on a network (the embedded emulator
    # reached without a socket): the app may call it on its event loop.
    in_process: bool = False

    def app(self, access_log: logging.Logger | None = None) -> FastAPI:
        return create_app(
            self.settings, self.store, self.telemetry, access_log, store_in_process=self.in_process
        )


def seal_policy(settings: Settings) -> SealPolicy:
    """The sealer's policy: the sizes the settings give, the policy's own defaults for the
    rest; a page is one read response unless set."""
    given = {
        "segment_bytes": settings.segment_bytes,
        "hot_bytes": settings.seal_hot_bytes,
        "page_bytes": settings.seal_page_bytes or max(64, settings.max_read_bytes - _PAGE_ROOM),
    }
    return SealPolicy(**{name: value for name, value in given.items() if value is not None})


def retention_run(store: DynamoStore, settings: Settings) -> RetentionRun:
    """The retention and compaction run the settings describe: cuts announced as long ahead as
    a cache may keep a read, snapshots no larger than a response may be."""
    from .http.envelope import fits_one_response
    from .storage.retention import RetentionRun  # only the functions that run it load it

    return RetentionRun(
        store,
        delay=settings.retention_delay_seconds,
        compaction_min_bytes=settings.compaction_min_bytes,
        max_snapshot_bytes=settings.max_response_bytes,
        snapshot_fits=lambda messages: fits_one_response(messages, settings.max_response_bytes),
    )


def build_backend(
    settings: Settings,
    endpoint: str | None = None,
    telemetry: Telemetry | None = None,
    lean_emulator: bool = False,
    in_process: bool = False,
    dynamodb_endpoint: str | None = None,
) -> Backend:
    """Clients for real AWS (standard credentials, `AWS_ENDPOINT_URL*` honoured by boto3), or
    for the emulator at `endpoint`, leaving out what only AWS needs with `lean_emulator`
    (`AwsSettings.lean_emulator_dynamodb`); `in_process`: that emulator answers in this
    process, without a socket (see `Backend.in_process`). `dynamodb_endpoint`: DynamoDB
    elsewhere than the emulator's (DynamoDB Local), S3 still the emulator's."""
    if lean_emulator and (endpoint is None or dynamodb_endpoint is not None):
        raise ValueError("lean_emulator is for the emulator's clients, not AWS's")
    if endpoint is not None:
        aws = AwsSettings(
            region=EMULATOR_REGION,
            dynamodb_endpoint=dynamodb_endpoint or endpoint,
            s3_endpoint=endpoint,
            lean_emulator_dynamodb=lean_emulator,
        )
    else:
        aws = AwsSettings(region=settings.region)
    dynamodb, s3 = make_clients(aws)
    store = DynamoStore(
        dynamodb,
        s3,
        settings.table,
        settings.bucket,
        inline_max_bytes=settings.inline_max_bytes,
        chunk_cache_bytes=settings.chunk_cache_bytes,
        renew_fraction=settings.ttl_renew_fraction,
        write_deadline=settings.write_deadline,
        telemetry=telemetry,
        seal_mark_bytes=seal_policy(settings).hot_bytes,
    )
    return Backend(settings, dynamodb, s3, store, telemetry, in_process)


def use_emulator_credentials() -> None:
    """The emulator accepts any credentials; make sure boto3 finds some."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "emulator")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "emulator")
    os.environ.setdefault("AWS_DEFAULT_REGION", EMULATOR_REGION)


def ensure_resources(backend: Backend) -> None:
    ensure_table(backend.dynamodb, backend.settings.table)
    ensure_bucket(backend.s3, backend.settings.bucket)
