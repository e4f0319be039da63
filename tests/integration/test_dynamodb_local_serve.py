"""`dsaws serve --dynamodb-local` with a data directory: its tables in DynamoDB Local beside the
emulator's journal, kept across a restart; and a directory is never served with the other
kind of tables, whose collector would take its S3 objects for orphans."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import boto3
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


def _dynamodb_local_endpoint(server: ServerProcess) -> str:
    """The endpoint of the DynamoDB Local a `dsaws serve` started (its child's `-port`)."""
    assert server.process is not None
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        if int(parent) == server.process.pid and b"DynamoDBLocal.jar" in b" ".join(command):
            return f"http://127.0.0.1:{command[command.index(b'-port') + 1].decode()}"
    raise AssertionError("no DynamoDB Local under the server")


def _tables(endpoint: str, key: str, region: str = "us-east-1") -> list[str]:
    client = boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=key,
        aws_secret_access_key="anything",
    )
    return list(client.list_tables()["TableNames"])


def test_its_tables_are_the_servers_alone(tmp_path: Path, dynamodb_local_installed: None) -> None:
    """DynamoDB Local listens on every interface and checks no signature: a client that made
    up its credentials (from this machine or another) sees no table of the server's, whose
    access key id is kept owner-only with the data, as is the folder of its tables; a folder an
    earlier version shared (`shared-local-instance.db`) is handed to the server, data kept."""
    data = tmp_path / "data"
    with ServerProcess("--dynamodb-local", "--data-dir", str(data)) as server:
        stream = f"{server.base_url}/v1/stream/private"
        assert httpx.put(stream, content=b"hunter2", headers=TEXT).status_code == 201
        endpoint = _dynamodb_local_endpoint(server)
        key = (data / "dynamodb-local-key").read_text().strip()
        assert _tables(endpoint, "madeup") == [] == _tables(endpoint, key, region="eu-west-1")
        assert _tables(endpoint, key) == ["durable-streams"]
    assert stat.S_IMODE((data / "dynamodb-local").stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "dynamodb-local-key").stat().st_mode) == 0o600
    # As an earlier version left it: one shared database, no key.
    (data / "dynamodb-local" / f"{key}_us-east-1.db").rename(
        data / "dynamodb-local" / "shared-local-instance.db"
    )
    (data / "dynamodb-local-key").unlink()
    (data / "dynamodb-local").chmod(0o755)
    with ServerProcess("--dynamodb-local", "--data-dir", str(data)) as server:
        assert httpx.get(f"{server.base_url}/v1/stream/private?offset=-1").content == b"hunter2"
        assert _tables(_dynamodb_local_endpoint(server), "madeup") == []
    assert stat.S_IMODE((data / "dynamodb-local").stat().st_mode) == 0o700
