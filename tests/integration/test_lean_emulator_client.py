"""`dsaws serve`'s DynamoDB client for the embedded emulator, unsigned and unchecked by
botocore (`AwsSettings.lean_emulator_dynamodb`), beside the signed client every other test
uses, both answered by one emulator in this process (as two instances of a server would be):
what one writes the other reads, and the emulator's refusals reach both alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from core.config import Settings
from core.protocol.append import AppendIntent, Verdict
from core.runtime import Backend, build_backend, ensure_resources, use_emulator_credentials
from core.storage import CreateSpec, Payload
from core.storage.bootstrap import ensure_table
from infra._in_process import InProcessTransport
from infra.emulator import IN_PROCESS_ENDPOINT, Emulator

TEXT = "text/plain"


@pytest.fixture
def lean_and_signed() -> Iterator[tuple[Backend, Backend]]:
    use_emulator_credentials()
    emulator = Emulator()
    suffix = uuid.uuid4().hex[:12]  # moto's tables outlive an in-process emulator
    settings = Settings(table=f"lean-{suffix}", bucket=f"lean-{suffix}", inline_max_bytes=1024)
    lean = build_backend(settings, endpoint=IN_PROCESS_ENDPOINT, lean_emulator=True)
    signed = build_backend(settings, endpoint=IN_PROCESS_ENDPOINT)
    for backend in (lean, signed):
        emulator.connect(backend.dynamodb)
        emulator.connect(backend.s3)
    ensure_resources(lean)
    yield lean, signed
    emulator.stop()


def _read_all(backend: Backend, path: str) -> bytes:
    info = backend.store.get(path)
    assert info is not None
    return backend.store.read(info, 0, 10**9).data


def _append(backend: Backend, path: str, data: bytes, close: bool = False) -> Verdict:
    outcome = backend.store.append(path, AppendIntent(TEXT, bool(data), close), Payload(data))
    assert outcome.decision is not None
    return outcome.decision.verdict


def test_only_the_lean_client_skips_signing_and_botocore_checks() -> None:
    use_emulator_credentials()
    emulator = Emulator()
    settings = Settings(table=f"lean-{uuid.uuid4().hex[:12]}")
    authorizations: list[str] = []
    agents: list[str] = []

    def recording(environ: dict[str, Any], start_response: Any) -> Any:
        authorizations.append(environ["HTTP_AUTHORIZATION"])
        agents.append(environ["HTTP_USER_AGENT"])
        return emulator.app(environ, start_response)

    lean, signed = (
        build_backend(settings, endpoint=IN_PROCESS_ENDPOINT, lean_emulator=lean)
        for lean in (True, False)
    )
    for backend in (lean, signed):
        InProcessTransport(recording).attach(backend.dynamodb)
    ensure_table(signed.dynamodb, settings.table)
    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    answer = lean.dynamodb.get_item(TableName=settings.table, Key=key, ConsistentRead=1)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200  # not refused by botocore
    with pytest.raises(ParamValidationError):
        signed.dynamodb.get_item(TableName=settings.table, Key=key, ConsistentRead=1)
    signed.dynamodb.get_item(TableName=settings.table, Key=key)
    *created, unsigned, signed_one = authorizations
    assert all(" Signature=unsigned" not in each for each in [*created, signed_one])
    # The scope the signed client uses, given to the unsigned request.
    assert unsigned.split("/")[2:4] == signed_one.split("/")[2:4] == ["us-east-1", "dynamodb"]
    assert unsigned.endswith(" Signature=unsigned")
    assert agents[-2].startswith("durable-streams-aws (embedded emulator)")
    assert agents[-1].startswith("Botocore/")


def test_streams_written_by_either_client_read_the_same_from_both(
    lean_and_signed: tuple[Backend, Backend],
) -> None:
    lean, signed = lean_and_signed
    lean.store.create("s", CreateSpec(TEXT, None, None, False, Payload(b"one,")))
    assert _append(signed, "s", b"two,") is Verdict.COMMIT
    large = b"L" * 5000  # over the inline limit: the chunk goes to S3
    assert _append(lean, "s", large) is Verdict.COMMIT
    expected = b"one,two," + large
    assert _read_all(lean, "s") == expected
    assert _read_all(signed, "s") == expected


def test_a_stream_closed_by_one_client_refuses_appends_from_both(
    lean_and_signed: tuple[Backend, Backend],
) -> None:
    lean, signed = lean_and_signed
    signed.store.create("c", CreateSpec(TEXT, None, None, False, Payload(b"a")))
    assert _append(lean, "c", b"b", close=True) is Verdict.COMMIT
    for backend in (lean, signed):
        assert _append(backend, "c", b"c") is Verdict.CLOSED
    assert _read_all(lean, "c") == b"ab"


@pytest.mark.parametrize("client", ["lean", "signed"])
def test_the_emulators_refusals_reach_the_lean_client_as_the_signed_one(
    lean_and_signed: tuple[Backend, Backend], client: str
) -> None:
    backend = dict(zip(["lean", "signed"], lean_and_signed, strict=True))[client]
    dynamodb, table = backend.dynamodb, backend.settings.table
    item = {"pk": {"S": "once"}, "sk": {"S": "m"}}
    dynamodb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError) as failed:
        dynamodb.put_item(
            TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)"
        )
    assert failed.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    with pytest.raises(ClientError) as invalid:
        dynamodb.put_item(TableName=table, Item={"pk": {"S": ""}, "sk": {"S": "m"}})
    assert invalid.value.response["Error"]["Code"] == "ValidationException"
