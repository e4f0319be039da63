"""`dsaws serve` on its data directory collects deleted and expired streams in the background,
as a deployment's collector function does, and compacts its journal once that is mostly
history: the bytes of a deleted or expired stream leave the disk, the others stay, and a
restart finds the same streams."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from support import ServerProcess

pytestmark = pytest.mark.integration

QUICK = {
    "DS_COLLECT_INTERVAL": "0.3",
    "DS_COLLECT_GRACE_SECONDS": "0.5",
    "DS_JOURNAL_COMPACT_MIN_BYTES": "1",
    "DS_SEAL_INTERVAL": "0",  # sealing is not what these tests watch
}
BINARY = {"Content-Type": "application/octet-stream"}


def marker(name: str) -> bytes:
    """200 KB that appear nowhere else: in the journal exactly while the stream is held."""
    return (f"<{name}:{os.urandom(8).hex()}>".encode()) * (200_000 // 30)


def wait_until_gone(journal: Path, data: bytes, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while data in journal.read_bytes():
        assert time.monotonic() < deadline, "the bytes are still in the journal"
        time.sleep(0.2)


def test_a_deleted_streams_bytes_leave_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "journal.bin"
    gone, kept = marker("gone"), marker("kept")
    with ServerProcess("--data-dir", str(tmp_path), env=QUICK) as server:
        base = f"{server.base_url}/v1/stream"
        for name, data in (("gone", gone), ("kept", kept)):
            assert httpx.put(f"{base}/{name}", headers=BINARY, content=data).status_code == 201
        assert gone in journal.read_bytes()
        assert httpx.delete(f"{base}/gone").status_code == 204
        wait_until_gone(journal, gone)
        assert kept in journal.read_bytes()
        assert httpx.get(f"{base}/kept").content == kept
    with ServerProcess("--data-dir", str(tmp_path), env=QUICK) as again:
        base = f"{again.base_url}/v1/stream"
        assert httpx.get(f"{base}/gone").status_code == 404
        assert httpx.get(f"{base}/kept").content == kept
        # The path is free for a new stream.
        assert httpx.put(f"{base}/gone", headers=BINARY, content=b"new").status_code == 201


def test_an_expired_streams_bytes_leave_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "journal.bin"
    expiring = marker("expiring")
    with ServerProcess("--data-dir", str(tmp_path), env=QUICK) as server:
        base = f"{server.base_url}/v1/stream"
        headers = {**BINARY, "Stream-TTL": "1"}
        assert httpx.put(f"{base}/expiring", headers=headers, content=expiring).status_code == 201
        wait_until_gone(journal, expiring)
        assert httpx.get(f"{base}/expiring").status_code == 404
