"""`dsaws serve --dynamodb-local` with a data directory: its tables in DynamoDB Local beside the
emulator's journal, kept across a restart; and a directory is never served with the other
kind of tables, whose collector would take its S3 objects for orphans."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from support import ServerProcess, run_dsaws

TEXT = {"content-type": "text/plain"}


def test_a_data_directory_keeps_its_kind_of_tables(
    tmp_path: Path, dynamodb_local_installed: None
) -> None:
    local, embedded = tmp_path / "local", tmp_path / "embedded"
    for _ in range(2):  # the second start finds what the first kept
        with ServerProcess("--dynamodb-local", "--data-dir", str(local)) as server:
            stream = f"{server.base_url}/v1/stream/kept"
            if httpx.head(stream).status_code == 404:
                assert httpx.put(stream, content=b"x" * 5000, headers=TEXT).status_code == 201
            assert httpx.get(f"{stream}?offset=-1").content == b"x" * 5000
    with ServerProcess("--data-dir", str(embedded)):
        pass
    env = dict(os.environ)
    refused = run_dsaws(env, "serve", "--data-dir", str(local), "--port", "1")
    assert refused.returncode == 2 and "serve it with --dynamodb-local" in refused.stderr
    refused = run_dsaws(env, "serve", "--dynamodb-local", "--data-dir", str(embedded))
    assert refused.returncode == 2 and "serve it without --dynamodb-local" in refused.stderr
    collected = run_dsaws(env, "gc", "--data-dir", str(local))
    assert collected.returncode != 0 and "keeps its tables in DynamoDB Local" in collected.stderr
