"""The embedded emulator's journal: every request that changed something, in the order the
emulator applied them, in one append-only file that is replayed when the emulator starts again.

A request is written to the file (one `write`, to the operating system) before the emulator's
answer leaves, so an answer a server has seen is on disk in the same order as the emulator's
memory: a killed process loses nothing it acknowledged. A record interrupted by the kill fails
its checksum and is dropped with whatever followed it; its request was never answered.

The journal grows with every write, so `compact` rewrites it as the requests that rebuild the
current state: the resource requests (tables, buckets, settings) as they came, then one PutItem
per item and one PutObject per object.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import uuid
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._in_process import wsgi_environ

JOURNAL_NAME = "journal.bin"
LOCK_NAME = "lock"
COMPACTING_SUFFIX = ".compacting"  # a rewrite in progress: never the journal until renamed
_HEADER = struct.Struct(">II")  # payload length, CRC-32 of the payload

# DynamoDB (and other JSON-protocol) actions that change nothing.
_READ_ACTIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "TransactGetItems",
        "DescribeTable",
        "ListTables",
        "DescribeTimeToLive",
        "DescribeContinuousBackups",
        "ListTagsOfResource",
        "DescribeEndpoints",
        "GetSecretValue",
        "DescribeSecret",
        "GetParameter",
        "GetParameters",
    }
)
# The actions whose effect is the items a compaction writes out again.
_ITEM_ACTIONS = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
)
# RAW_URI: moto takes S3 keys from the path as sent (quoted), not from PATH_INFO.
_KEPT_ENVIRON = ("REQUEST_METHOD", "PATH_INFO", "RAW_URI", "QUERY_STRING", "CONTENT_TYPE")


class JournalError(RuntimeError):
    """The journal cannot be used: another process holds it, or replaying it failed."""


class JournalInUse(JournalError):
    """Another process holds the journal: commands other than `dsaws serve` word their own
    refusal from this."""


@dataclass(frozen=True)
class Record:
    """One request as the emulator's WSGI app received it, and the status it answered: a
    refused write is journaled too (moto may have changed something before refusing, as an
    UpdateItem that grows an item past its limit does), and replay expects the same status."""

    environ: dict[str, str]
    body: bytes
    status: int = 200

    @classmethod
    def of(cls, environ: dict[str, Any], body: bytes, status: int = 200) -> Record:
        kept = {
            name: value
            for name, value in environ.items()
            if (name in _KEPT_ENVIRON or name.startswith("HTTP_")) and isinstance(value, str)
        }
        return cls(kept, body, status)

    def wsgi_environ(self) -> dict[str, Any]:
        return wsgi_environ(self.environ, self.body)

    @property
    def action(self) -> str | None:
        """The JSON-protocol action (`PutItem`), or None for an S3 request."""
        target = self.environ.get("HTTP_X_AMZ_TARGET")
        return target.rsplit(".", 1)[-1] if target else None

    @property
    def changes_something(self) -> bool:
        action = self.action
        if action is not None:
            return action not in _READ_ACTIONS
        return self.environ.get("REQUEST_METHOD") in {"PUT", "POST", "DELETE"}

    @property
    def changes_items(self) -> bool:
        """Whether the request wrote items or objects (as opposed to tables, buckets and their
        settings)."""
        action = self.action
        if action is not None:
            return action in _ITEM_ACTIONS
        path = self.environ.get("PATH_INFO", "/").strip("/")
        deletes_objects = "delete" in self.environ.get("QUERY_STRING", "").split("&")
        return "/" in path or deletes_objects

    @property
    def created(self) -> tuple[str, str] | None:
        """("table", name) for a CreateTable, ("bucket", name) for a CreateBucket."""
        if self.action == "CreateTable":
            return "table", str(json.loads(self.body)["TableName"])
        path = self.environ.get("PATH_INFO", "/").strip("/")
        plain = not self.environ.get("QUERY_STRING")
        creates_bucket = self.action is None and self.environ.get("REQUEST_METHOD") == "PUT"
        if creates_bucket and plain and path and "/" not in path:
            return "bucket", path
        return None

    def encode(self) -> bytes:
        head = json.dumps({"environ": self.environ, "status": self.status}).encode()
        payload = head + b"\n" + self.body
        return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload

    @classmethod
    def decode(cls, payload: bytes) -> Record:
        head, _, body = payload.partition(b"\n")
        fields = json.loads(head)
        return cls(dict(fields["environ"]), body, int(fields["status"]))


def _next_record(file: Any) -> Record | None:
    """The whole record at the file's position, or None (the end, or a bad record)."""
    header = file.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    length, checksum = _HEADER.unpack(header)
    # An empty payload is never written (and zeroes, which a crash may leave, checksum to 0).
    if length == 0:
        return None
    payload = file.read(length)
    if len(payload) < length or zlib.crc32(payload) != checksum:
        return None
    try:
        return Record.decode(payload)
    except (ValueError, KeyError, TypeError):
        return None


def _torn_tail(data: bytes, at: int) -> bool:
    """Whether the bad bytes from `at` on are what an interrupted last write leaves: a record
    running past the end of the file, or zeroes. Anything else is damage in the middle, and
    cutting there would drop the acknowledged records after it."""
    rest = data[at:]
    if not rest.strip(b"\0"):
        return True
    if len(rest) < _HEADER.size:
        return True
    length, _ = _HEADER.unpack_from(rest)
    return length > 0 and _HEADER.size + length >= len(rest)


class Journal:
    """The journal in `directory`, held by this process until `close`."""

    def __init__(self, directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise JournalError(f"{directory} cannot hold the data: {error.strerror}") from None
        self.directory = directory
        self.path = directory / JOURNAL_NAME
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            raise JournalInUse(
                f"{directory} is in use by another dsaws serve (stop it, or use another --data-dir)"
            ) from None
        self._fd: int | None = None
        self._closed = False
        self.position = 0  # how far `records` has read
        # Rewrites a crash interrupted before their rename: the journal itself is whole.
        for leftover in directory.glob(f"*{COMPACTING_SUFFIX}"):
            leftover.unlink(missing_ok=True)

    def read(self) -> list[Record]:
        """Every whole record (see `records`)."""
        return list(self.records())

    def records(self) -> Iterator[Record]:
        """Every whole record, read from the file as they are taken (a replay holds one record
        at a time, not the whole journal). A torn tail (a write cut short by a kill) is cut
        off once the whole records are taken; damage before the last record is refused with
        `JournalError` when it is reached: the records after it were acknowledged."""
        if not self.path.exists():
            return
        try:
            file = self.path.open("rb")
        except OSError as error:
            raise JournalError(f"{self.path} cannot be read: {error.strerror}") from None
        with file:
            good = 0
            while (record := _next_record(file)) is not None:
                good = self.position = file.tell()
                yield record
            file.seek(good)
            rest = file.read()
        if not rest:
            return
        if not _torn_tail(rest, 0):
            raise JournalError(
                f"{self.path} is damaged at byte {good} of {good + len(rest)}, before its last "
                "record: restore it from a copy, or move it away to start empty"
            )
        with self.path.open("r+b") as damaged:
            damaged.truncate(good)

    def append(self, record: Record) -> None:
        """Write `record` whole, or leave the file as it was and raise."""
        if self._closed:
            raise JournalError("the journal is closed: the emulator has stopped")
        if self._fd is None:
            # Owner only: records carry the clients' request headers (their signatures).
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        data = record.encode()
        size = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, data)
            while written < len(data):  # a regular file takes it all at once; insurance
                written += os.write(self._fd, data[written:])
        except OSError:
            os.ftruncate(self._fd, size)  # no half record for later ones to hide behind
            raise

    def sync(self) -> None:
        """Make what was written survive a machine crash too, not only a killed process."""
        if self._fd is not None:
            os.fsync(self._fd)

    def size(self) -> int:
        """The journal's length in bytes, as written so far."""
        if self._fd is not None:
            return os.fstat(self._fd).st_size
        return self.path.stat().st_size if self.path.exists() else 0

    def rewrite(self, records: Iterable[Record]) -> None:
        """Replace the journal with `records`, atomically."""
        self.finish_rewrite(self.write_fresh(records), self.size())

    def write_fresh(self, records: Iterable[Record]) -> Path:
        """The first half of a rewrite, which needs no lock: `records` (the state as of some
        moment) in a file beside the journal, on disk. Until `finish_rewrite` renames it, a
        crash leaves the journal as it was (and the file is removed when the journal is next
        opened)."""
        # A name of its own: a compaction of an earlier holder of the directory may still be
        # winding down, and must not meet this one's file.
        fresh = self.path.with_name(f"{self.path.stem}.{uuid.uuid4().hex}{COMPACTING_SUFFIX}")
        with os.fdopen(os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:
            for record in records:
                file.write(record.encode())
            file.flush()
            os.fsync(file.fileno())
        return fresh

    def finish_rewrite(self, fresh: Path, since: int) -> None:
        """The second half, under the lock that orders the records: the records appended
        since the state was taken (from byte `since` on) follow it into the fresh file, which
        then replaces the journal."""
        with open(fresh, "r+b") as file:
            file.seek(0, os.SEEK_END)
            if since < self.size():
                with self.path.open("rb") as current:
                    current.seek(since)
                    while block := current.read(1 << 20):
                        file.write(block)
            file.flush()
            os.fsync(file.fileno())
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        os.replace(fresh, self.path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def close(self) -> None:
        self._closed = True
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        os.close(self._lock)


def resource_records(records: Iterable[Record]) -> Iterator[Record]:
    """The requests among `records` that made or changed tables and buckets."""
    return (record for record in records if not record.changes_items)


def created_resources(records: Iterable[Record]) -> tuple[set[str], set[str]]:
    """The tables and the buckets that `records` created."""
    tables: set[str] = set()
    buckets: set[str] = set()
    for record in records:
        created = record.created
        if created is not None:
            (tables if created[0] == "table" else buckets).add(created[1])
    return tables, buckets
