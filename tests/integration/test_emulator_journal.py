"""The embedded emulator's journal: replayed on restart, a torn tail cut off, compaction that
keeps every item and object, one process per directory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durable_streams_aws.core.runtime import use_emulator_credentials
from durable_streams_aws.core.storage.aws import AwsSettings, make_clients
from durable_streams_aws.core.storage.bootstrap import ensure_bucket, ensure_table
from durable_streams_aws.infra import emulator as emulator_module
from durable_streams_aws.infra._journal import JOURNAL_NAME, Journal, JournalError
from durable_streams_aws.infra.emulator import IN_PROCESS_ENDPOINT, Emulator


def clients(emulator: Emulator) -> tuple[Any, Any]:
    use_emulator_credentials()
    settings = AwsSettings(
        region="us-east-1", dynamodb_endpoint=IN_PROCESS_ENDPOINT, s3_endpoint=IN_PROCESS_ENDPOINT
    )
    dynamodb, s3 = make_clients(settings)
    return emulator.connect(dynamodb), emulator.connect(s3)


@pytest.fixture
def names() -> Iterator[tuple[str, str]]:
    """A table and bucket of this test's own (moto's state is one per process)."""
    suffix = uuid.uuid4().hex[:10]
    yield f"journal-{suffix}", f"journal-{suffix}"


def contents(emulator: Emulator, table: str, bucket: str) -> tuple[list[Any], dict[str, bytes]]:
    dynamodb, s3 = clients(emulator)
    items = sorted(
        dynamodb.scan(TableName=table, ConsistentRead=True)["Items"],
        key=lambda item: (item["pk"]["S"], item["sk"]["S"]),
    )
    listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    objects = {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}
    return items, objects


def write_some(emulator: Emulator, table: str, bucket: str) -> None:
    dynamodb, s3 = clients(emulator)
    ensure_table(dynamodb, table)
    ensure_bucket(s3, bucket)
    for number in range(30):
        dynamodb.put_item(
            TableName=table,
            Item={
                "pk": {"S": f"p{number % 3}"},
                "sk": {"S": f"s{number:03}"},
                "data": {"B": bytes([number]) * 10},
                "n": {"N": str(number)},
                "tags": {"SS": ["a", f"t{number}"]},
            },
        )
    dynamodb.update_item(
        TableName=table,
        Key={"pk": {"S": "p0"}, "sk": {"S": "s000"}},
        UpdateExpression="SET n = n + :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    dynamodb.delete_item(TableName=table, Key={"pk": {"S": "p1"}, "sk": {"S": "s001"}})
    refused = dynamodb.exceptions.ConditionalCheckFailedException
    with pytest.raises(refused):  # a refused write changes nothing, and is not journaled
        dynamodb.put_item(
            TableName=table,
            Item={"pk": {"S": "p2"}, "sk": {"S": "s002"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    oversized = dynamodb.exceptions.ClientError
    with pytest.raises(oversized):  # refused after moto changed the item: replayed alike
        dynamodb.update_item(
            TableName=table,
            Key={"pk": {"S": "p2"}, "sk": {"S": "s005"}},
            UpdateExpression="SET a = :small, b = :big, c = :big",
            ExpressionAttributeValues={":small": {"S": "changed"}, ":big": {"B": b"x" * 250_000}},
        )
    s3.put_object(Bucket=bucket, Key="a/b c/ü.bin", Body=b"\x00\xff" * 5000)
    for key in ("a%41b", "semi;colon", "x%2Fy"):  # moto reads keys from the quoted path
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    s3.put_object(Bucket=bucket, Key="gone", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="gone")


def forget(table: str, bucket: str) -> None:
    """What a new process would start with: no such table, no such bucket (taken out of moto
    directly, so the journal does not hear of it)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import s3_backends

    dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].delete_table(table)
    s3 = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for key in list(s3.get_bucket(bucket).keys):
        s3.delete_object(bucket, key)
    s3.delete_bucket(bucket)


def written_and_stopped(
    directory: Path, table: str, bucket: str
) -> tuple[list[Any], dict[str, bytes]]:
    """`write_some` through an emulator journaling to `directory`, then stopped; returns what
    it held."""
    first = Emulator(data_dir=directory)
    write_some(first, table, bucket)
    held = contents(first, table, bucket)
    first.stop()
    return held


def journal_length(directory: Path) -> int:
    journal = Journal(directory)
    try:
        return len(journal.read())
    finally:
        journal.close()


def test_a_restarted_emulator_holds_what_was_written(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    table, bucket = names
    before = written_and_stopped(tmp_path, table, bucket)
    forget(table, bucket)

    second = Emulator(data_dir=tmp_path)
    try:
        assert contents(second, table, bucket) == before
        assert before[0][0]["n"] == {"N": "1"} and len(before[0]) == 29
        assert before[1] == {
            "a/b c/ü.bin": b"\x00\xff" * 5000,
            **{key: key.encode() for key in ("a%41b", "semi;colon", "x%2Fy")},
        }
    finally:
        second.stop()


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\x00\x00\x10\x00garbage", id="a record the kill cut short"),
        pytest.param(b"\0" * 4096, id="zeroes (a length and checksum of 0 would pass)"),
    ],
)
def test_what_a_crash_leaves_after_the_last_record_is_cut_off(
    tmp_path: Path, names: tuple[str, str], tail: bytes
) -> None:
    table, bucket = names
    before = written_and_stopped(tmp_path, table, bucket)
    journal = tmp_path / JOURNAL_NAME
    whole = journal.stat().st_size
    with journal.open("ab") as file:
        file.write(tail)
    forget(table, bucket)

    second = Emulator(data_dir=tmp_path)
    try:
        assert journal.stat().st_size == whole
        assert contents(second, table, bucket) == before
    finally:
        second.stop()


def test_damage_before_the_last_record_is_refused_not_cut(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    table, bucket = names
    written_and_stopped(tmp_path, table, bucket)
    journal = tmp_path / JOURNAL_NAME
    data = bytearray(journal.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, acknowledged records after it
    journal.write_bytes(bytes(data))
    forget(table, bucket)

    with pytest.raises(JournalError, match="damaged at byte"):
        Emulator(data_dir=tmp_path)
    assert journal.read_bytes() == bytes(data)  # nothing cut


def test_compaction_keeps_every_item_and_object(
    tmp_path: Path, names: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table, bucket = names
    before = written_and_stopped(tmp_path, table, bucket)
    records_before = journal_length(tmp_path)
    forget(table, bucket)

    monkeypatch.setattr(emulator_module, "COMPACT_AFTER_RECORDS", 5)
    compacting = Emulator(data_dir=tmp_path)  # replays, then rewrites the journal
    compacting.stop()
    records_after = journal_length(tmp_path)
    # Table, TTL setting, bucket; 29 items; 1 object; the updates and deletes folded in.
    assert records_after < records_before
    forget(table, bucket)

    again = Emulator(data_dir=tmp_path)
    try:
        assert contents(again, table, bucket) == before
    finally:
        again.stop()


def test_one_directory_serves_one_emulator(tmp_path: Path) -> None:
    first = Emulator(data_dir=tmp_path)
    try:
        with pytest.raises(JournalError, match="in use by another"):
            Emulator(data_dir=tmp_path)
    finally:
        first.stop()


def test_a_directory_that_cannot_hold_the_data_is_refused_plainly(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    with pytest.raises(JournalError, match="cannot hold the data"):
        Emulator(data_dir=a_file)
    assert a_file.read_text() == "not a directory"
