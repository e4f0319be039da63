"""`dsaws gc` and `dsaws seal` on the embedded emulator's data directory, as `dsaws serve`
leaves it: they open its journal (and its lock), so they run between servers and refuse while
one holds the directory."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import httpx
from support import ServerProcess, dsaws, run_dsaws

from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, Payload
from durable_streams_aws.infra.emulator import JOURNAL_NAME, Emulator

TEXT = {"Content-Type": "text/plain"}
# Over the inline limit, so the body goes to S3 and its bytes stand in the journal as sent.
SERVER_ENV = {"DS_INLINE_MAX_BYTES": "1024", "DS_SEAL_INTERVAL": "0"}


def local_env() -> dict[str, str]:
    """The environment without an AWS endpoint: the commands' default is the data directory."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}


def read_all(client: httpx.Client, url: str) -> bytes:
    response = client.get(url, params={"offset": "-1"})
    assert response.status_code == 200, response.text
    return response.content


def test_gc_removes_a_deleted_streams_data_from_a_stopped_servers_directory(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    gone = uuid.uuid4().hex.encode() * 200  # 6,400 bytes no other record holds
    kept = b"kept " * 300
    with (
        ServerProcess("--data-dir", str(data_dir), env=SERVER_ENV) as server,
        httpx.Client(base_url=f"{server.base_url}/v1/stream", timeout=30) as client,
    ):
        for path, body in (("/gone", gone), ("/kept", kept)):
            assert client.put(path, headers=TEXT).status_code == 201
            assert client.post(path, content=body, headers=TEXT).status_code == 204
        assert client.delete("/gone").status_code == 204
    journal = data_dir / JOURNAL_NAME
    assert gone in journal.read_bytes()

    run = run_dsaws(local_env(), "gc", "--data-dir", str(data_dir), "--orphan-grace", "0")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["incarnations_removed"] == 1 and report["objects_deleted"] >= 1, report
    assert "in flight" not in run.stderr  # nothing can be writing while the lock is held
    # The journal was compacted: the deleted bytes have left the disk, not only the emulator.
    assert gone not in journal.read_bytes()
    assert kept[:20] in journal.read_bytes()

    with (
        ServerProcess("--data-dir", str(data_dir), env=SERVER_ENV) as server,
        httpx.Client(base_url=f"{server.base_url}/v1/stream", timeout=30) as client,
    ):
        assert client.get("/gone", params={"offset": "-1"}).status_code == 404
        assert read_all(client, "/kept") == kept
        assert client.put("/gone", headers=TEXT).status_code == 201
        assert client.post("/gone", content=b"again", headers=TEXT).status_code == 204
        assert read_all(client, "/gone") == b"again"
    again = run_dsaws(local_env(), "gc", "--data-dir", str(data_dir), "--orphan-grace", "0")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["incarnations_removed"] == 0


def test_seal_seals_a_stream_a_stopped_server_wrote(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    written = b"".join(f"message {n:04d} ".encode() * 20 for n in range(60))
    with (
        ServerProcess("--data-dir", str(data_dir), env=SERVER_ENV) as server,
        httpx.Client(base_url=f"{server.base_url}/v1/stream", timeout=30) as client,
    ):
        assert client.put("/p", headers=TEXT).status_code == 201
        for start in range(0, len(written), 700):
            piece = written[start : start + 700]
            assert client.post("/p", content=piece, headers=TEXT).status_code == 204
        closed = client.post("/p", headers={**TEXT, "Stream-Closed": "true"})
        assert closed.status_code == 204  # a closed stream is sealed whole

    report = dsaws(local_env(), "seal", "--data-dir", str(data_dir), "--path", "p")
    assert report["streams_sealed"] == 1 and report["segments_written"] >= 1, report
    assert report["bytes_sealed"] == len(written)
    # Kept: the next run finds nothing left to seal.
    assert (
        dsaws(local_env(), "seal", "--data-dir", str(data_dir), "--path", "p")["segments_written"]
        == 0
    )

    with (
        ServerProcess("--data-dir", str(data_dir), env=SERVER_ENV) as server,
        httpx.Client(base_url=f"{server.base_url}/v1/stream", timeout=30) as client,
    ):
        assert read_all(client, "/p") == written


def test_gc_and_seal_refuse_a_directory_a_server_is_using(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with (
        ServerProcess("--data-dir", str(data_dir), env=SERVER_ENV) as server,
        httpx.Client(base_url=f"{server.base_url}/v1/stream", timeout=30) as client,
    ):
        assert client.put("/busy", headers=TEXT).status_code == 201
        assert client.post("/busy", content=b"one", headers=TEXT).status_code == 204
        journal = (data_dir / JOURNAL_NAME).read_bytes()
        for command in (["gc", "--orphan-grace", "0"], ["seal", "--all"]):
            run = run_dsaws(local_env(), *command, "--data-dir", str(data_dir))
            assert run.returncode == 3, run.stderr
            assert run.stdout == ""
            message = run.stderr.strip()
            assert len(message.splitlines()) == 1, message
            assert str(data_dir) in message and "stop it first" in message, message
        assert (data_dir / JOURNAL_NAME).read_bytes() == journal
        assert client.post("/busy", content=b" two", headers=TEXT).status_code == 204
        assert read_all(client, "/busy") == b"one two"


def test_a_directory_without_data_is_left_uncreated(tmp_path: Path) -> None:
    missing = tmp_path / "never-served"
    env = {**local_env(), "DSAWS_DATA_DIR": str(missing)}
    for command in (["gc"], ["seal"], ["seal", "--data-dir", str(missing), "--all"]):
        run = run_dsaws(env, *command)
        assert run.returncode == 0, run.stderr
        assert set(json.loads(run.stdout).values()) == {0}
        assert str(missing) in run.stderr and "nothing to do" in run.stderr
    assert not missing.exists()


def test_aws_and_an_endpoint_in_the_environment_still_mean_aws(
    backend: Backend, emulator: Emulator, tmp_path: Path
) -> None:
    table, bucket = backend.settings.table, backend.settings.bucket
    where = ("--table", table, "--bucket", bucket)
    endpoint = {
        **local_env(),
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
    }

    def deleted(path: str) -> None:
        spec = CreateSpec("text/plain", payload=Payload(b"x" * 2000))  # in S3: 1 KiB inline
        backend.store.create(path, spec)
        backend.store.delete(path)

    # --aws, the endpoint set: what `dsaws gc` did before it knew the data directory.
    deleted("one")
    first = dsaws(endpoint, "gc", "--aws", *where, "--orphan-grace", "0")
    assert first["incarnations_removed"] == 1 and first["objects_deleted"] == 1, first
    # No --aws, the endpoint set (and a DSAWS_DATA_DIR, which conftest sets): still AWS, said.
    deleted("two")
    run = run_dsaws(endpoint, "gc", *where, "--orphan-grace", "0")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["incarnations_removed"] == 1
    assert "AWS_ENDPOINT_URL is set" in run.stderr
    # --data-dir overrides the endpoint; with --aws it is refused.
    local = run_dsaws(endpoint, "gc", "--data-dir", str(tmp_path / "none"), *where)
    assert local.returncode == 0 and "nothing to do" in local.stderr, local.stderr
    both = run_dsaws(endpoint, "seal", "--aws", "--data-dir", str(tmp_path), *where)
    assert both.returncode == 2 and "not allowed with" in both.stderr, both.stderr


def test_retention_gives_an_existing_stream_a_policy_and_runs_it(tmp_path: Path) -> None:
    """The upgrade path: a stream made before it had a policy gets one, and the next run
    compacts it (no delay here: DS_RETENTION_DELAY=0)."""
    data_dir = tmp_path / "data"
    changes = [
        {"type": "row", "key": f"k{n % 5}", "value": {"n": n}, "headers": {"operation": op}}
        for n, op in enumerate(["insert"] * 5 + ["update"] * 20)
    ]
    env = {**SERVER_ENV, "DS_RETENTION_INTERVAL": "0"}
    with (
        ServerProcess("--data-dir", str(data_dir), env=env) as server,
        httpx.Client(base_url=f"{server.base_url}/v1/stream", timeout=30) as client,
    ):
        json_type = {"Content-Type": "application/json"}
        assert client.put("/old", headers=json_type).status_code == 201
        assert client.post("/old", content=json.dumps(changes), headers=json_type).is_success
        closed = client.post("/old", headers={**json_type, "Stream-Closed": "true"})
        assert closed.status_code == 204  # sealed whole by the next seal
        assert client.put("/bytes", headers=TEXT).status_code == 201

    where = ("--data-dir", str(data_dir))
    refused = run_dsaws(local_env(), "retention", *where, "--set", "bytes", "compact")
    assert refused.returncode == 1 and "JSON streams only" in refused.stderr
    missing = run_dsaws(local_env(), "retention", *where, "--set", "none", "compact")
    assert missing.returncode == 1 and "no such stream" in missing.stderr
    bad = run_dsaws(local_env(), "retention", *where, "--set", "old", "max-age=x")
    assert bad.returncode == 2 and "Stream-Retention" in bad.stderr
    assert dsaws(local_env(), "retention", *where, "--set", "old", "compact") == {
        "path": "old",
        "retention": "compact",
    }
    dsaws(local_env(), "seal", *where, "--path", "old")
    runs = {**local_env(), "DS_RETENTION_DELAY": "0", "DS_COMPACTION_MIN_BYTES": "1"}
    assert dsaws(runs, "retention", *where)["streams_compacted"] == 1

    with (
        ServerProcess("--data-dir", str(data_dir), env=env) as server,
        httpx.Client(base_url=f"{server.base_url}/v1/stream", timeout=30) as client,
    ):
        head = client.head("/old")
        assert head.headers["stream-retention"] == "compact"
        assert head.headers["stream-earliest-offset"].endswith("_s")
        snapshot = client.get("/old", params={"offset": "-1"}).json()
        rows = {m["key"]: m["value"] for m in snapshot if "key" in m}
        assert rows == {f"k{k}": {"n": 20 + k} for k in range(5)}
