"""The storage `dsaws gc` and `dsaws seal` work on, chosen as `dsaws serve` chooses its own:
the embedded emulator's data directory, or AWS (or the endpoint in AWS_ENDPOINT_URL*)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Settings

if TYPE_CHECKING:
    from .runtime import Backend
    from .storage import DynamoStore


class Unavailable(Exception):
    """The storage cannot be opened; the message is one line for the user."""


class Empty(Exception):
    """There is nothing to work on (and nothing was created); the message says why."""


@dataclass(frozen=True)
class Storage:
    store: DynamoStore
    # The embedded emulator's data, held by this process (its lock): nothing else writes to it
    # meanwhile, and it answers one request at a time.
    embedded: bool


@contextmanager
def aws_storage(settings: Settings) -> Iterator[Storage]:
    from .runtime import build_backend

    yield Storage(build_backend(settings).store, embedded=False)


# The folder of a data directory where `dsaws serve --dynamodb-local` keeps DynamoDB Local's
# tables (the embedded emulator's journal beside it keeps only that mode's S3 objects).
DYNAMODB_LOCAL_FOLDER = "dynamodb-local"


def tables_of(data_dir: Path) -> str | None:
    """Where the tables of the data in `data_dir` are: "dynamodb-local", "moto" (the
    embedded emulator's journal), or None for a directory no server has kept data in. Its S3
    objects belong to those tables only: served with the other kind, the collector would find
    no item naming them and remove them as orphans."""
    from durable_streams_aws.infra.emulator import JOURNAL_NAME

    if (data_dir / DYNAMODB_LOCAL_FOLDER).is_dir():
        return "dynamodb-local"
    if (data_dir / JOURNAL_NAME).exists():
        return "moto"
    return None


@contextmanager
def embedded_storage(settings: Settings, data_dir: Path, command: str) -> Iterator[Storage]:
    """The embedded emulator's data in `data_dir`, replayed in this process, and compacted
    after the command's work so that what it removed leaves the disk too. Raises `Unavailable`
    while a `dsaws serve` holds the directory, `Empty` when it holds no streams (neither the
    directory nor the table and bucket are created)."""
    from durable_streams_aws.infra.emulator import (
        IN_PROCESS_ENDPOINT,
        JOURNAL_NAME,
        Emulator,
        JournalError,
        JournalInUse,
    )

    from .runtime import build_backend, use_emulator_credentials

    if not (data_dir / JOURNAL_NAME).exists():
        raise Empty(f"no dsaws serve has kept data in {data_dir}: nothing to do")
    if tables_of(data_dir) == "dynamodb-local":
        raise Unavailable(
            f"{data_dir} keeps its tables in DynamoDB Local: `dsaws serve --dynamodb-local "
            f"--data-dir {data_dir}` runs the collector and the sealer in its background "
            f"({command} changed nothing)"
        )
    use_emulator_credentials()
    try:
        emulator = Emulator(data_dir=data_dir)
    except JournalInUse:
        # Its server keeps the data in its own memory: changes made beside it would be lost,
        # or undo its own.
        raise Unavailable(
            f"{data_dir} is in use by a running dsaws serve: stop it first ({command} changed "
            "nothing)"
        ) from None
    except JournalError as error:
        raise Unavailable(str(error)) from None
    try:
        backend = build_backend(
            settings, endpoint=IN_PROCESS_ENDPOINT, lean_emulator=True, in_process=True
        )
        emulator.connect(backend.dynamodb)
        emulator.connect(backend.s3)
        if not _resources_exist(backend):
            raise Empty(
                f"{data_dir} lacks table {settings.table} or bucket {settings.bucket} (see "
                "--table and --bucket): nothing to do"
            )
        yield Storage(backend.store, embedded=True)
        emulator.compact()
    finally:
        emulator.stop()  # closing the journal syncs it to disk


def _resources_exist(backend: Backend) -> bool:
    """Whether the table and bucket are there: a server given another --table made others."""
    from botocore.exceptions import ClientError

    try:
        backend.dynamodb.describe_table(TableName=backend.settings.table)
        backend.s3.head_bucket(Bucket=backend.settings.bucket)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code")
        if code in {"ResourceNotFoundException", "404", "NoSuchBucket"}:
            return False
        raise
    return True
