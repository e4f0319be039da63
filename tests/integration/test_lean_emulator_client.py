"""`dsaws serve`'s DynamoDB client for the embedded emulator, unsigned and unchecked by
botocore (`AwsSettings.lean_emulator_dynamodb`), beside the signed client every other test
uses, both answered by one emulator (as two instances of a server would be): what one writes
the other reads, in the same account and region, and the emulator's refusals reach both
alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, ParamValidationError
from support import remove_resources

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.protocol.append import AppendIntent, Verdict
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.core.storage import CreateSpec, Payload
from durable_streams_aws.core.storage.aws import AwsSettings, make_clients
from durable_streams_aws.core.storage.bootstrap import ensure_table
from durable_streams_aws.infra._in_process import InProcessTransport
from durable_streams_aws.infra.emulator import IN_PROCESS_ENDPOINT, Emulator

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
    remove_resources(signed)
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
    seen: list[tuple[str, str]] = []  # (Authorization, User-Agent) of each request

    def recording(environ: dict[str, Any], start_response: Any) -> Any:
        seen.append((environ["HTTP_AUTHORIZATION"], environ["HTTP_USER_AGENT"]))
        return emulator.app(environ, start_response)

    lean = build_backend(settings, endpoint=IN_PROCESS_ENDPOINT, lean_emulator=True)
    signed = build_backend(settings, endpoint=IN_PROCESS_ENDPOINT)
    for backend in (lean, signed):
        InProcessTransport(recording).attach(backend.dynamodb)
    ensure_table(signed.dynamodb, settings.table)
    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    answer = lean.dynamodb.get_item(TableName=settings.table, Key=key, ConsistentRead=1)
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200  # not refused by botocore
    with pytest.raises(ParamValidationError):
        signed.dynamodb.get_item(TableName=settings.table, Key=key, ConsistentRead=1)
    signed.dynamodb.get_item(TableName=settings.table, Key=key)

    (unsigned, lean_agent), (signature, signed_agent) = seen[-2:]
    assert unsigned.endswith(" Signature=unsigned")
    assert " Signature=unsigned" not in signature
    # The scope the signed client signs with, given to the unsigned request.
    assert unsigned.split("/")[2:4] == signature.split("/")[2:4] == ["us-east-1", "dynamodb"]
    assert lean_agent.startswith("durable-streams-aws (embedded emulator)")
    assert signed_agent.startswith("Botocore/")
    signed.dynamodb.delete_table(TableName=settings.table)


def test_the_lean_client_reaches_the_region_it_is_made_for() -> None:
    """Not only moto's default region: each request names its client's."""
    use_emulator_credentials()
    emulator = Emulator()
    table = f"lean-{uuid.uuid4().hex[:12]}"

    def dynamodb(region: str, lean: bool) -> Any:
        client, _ = make_clients(
            AwsSettings(
                region=region,
                dynamodb_endpoint=IN_PROCESS_ENDPOINT,
                s3_endpoint=IN_PROCESS_ENDPOINT,
                lean_emulator_dynamodb=lean,
            )
        )
        return emulator.connect(client)

    lean, signed = dynamodb("eu-west-1", lean=True), dynamodb("eu-west-1", lean=False)
    elsewhere = dynamodb("us-east-1", lean=False)
    ensure_table(lean, table)
    assert table in signed.list_tables()["TableNames"]
    assert table not in elsewhere.list_tables()["TableNames"]
    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    signed.put_item(TableName=table, Item={**key, "v": {"S": "from the signed client"}})
    found = lean.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert found["v"] == {"S": "from the signed client"}
    signed.delete_table(TableName=table)


def test_the_lean_client_works_with_a_listening_emulator_too(emulator: Emulator) -> None:
    """The scope travels with the request, not with the in-process hand-off."""
    settings = Settings(
        table=f"lean-{uuid.uuid4().hex[:12]}", bucket=f"lean-{uuid.uuid4().hex[:12]}"
    )
    lean = build_backend(settings, endpoint=emulator.endpoint, lean_emulator=True)
    signed = build_backend(settings, endpoint=emulator.endpoint)
    ensure_resources(lean)
    lean.store.create("s", CreateSpec(TEXT, None, None, False, Payload(b"over the socket")))
    assert _read_all(signed, "s") == b"over the socket"
    remove_resources(signed)


def test_lean_clients_are_for_an_emulator_only() -> None:
    with pytest.raises(ValueError, match="emulator"):
        build_backend(Settings(), lean_emulator=True)


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
