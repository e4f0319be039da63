"""The embedded emulator's transactions are all-or-nothing for every error, as DynamoDB's are."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.headers import ProducerClaim
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, Payload
from durable_streams_aws.core.storage import _items as items


def _item(backend: Backend, pk: str, sk: str) -> dict[str, Any] | None:
    return backend.dynamodb.get_item(
        TableName=backend.settings.table,
        Key={"pk": {"S": pk}, "sk": {"S": sk}},
        ConsistentRead=True,
    ).get("Item")


def _put(backend: Backend, pk: str, sk: str, **attributes: Any) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": backend.settings.table,
            "Item": {"pk": {"S": pk}, "sk": {"S": sk}, **attributes},
        }
    }


def test_a_write_failing_after_others_rolls_them_all_back(backend: Backend) -> None:
    table = backend.settings.table
    backend.dynamodb.put_item(
        TableName=table, Item={"pk": {"S": "a"}, "sk": {"S": "x"}, "v": {"N": "1"}}
    )
    actions = [
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": "a"}, "sk": {"S": "x"}},
                "UpdateExpression": "SET v = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
            }
        },
        _put(backend, "b", "new"),
        {"Delete": {"TableName": table, "Key": {"pk": {"S": "a"}, "sk": {"S": "y"}}}},
        _put(backend, "c", "p#" + "x" * 1100),  # sort key over 1024 bytes: refused
    ]
    with pytest.raises(ClientError) as refused:
        backend.dynamodb.transact_write_items(TransactItems=actions)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert _item(backend, "a", "x")["v"] == {"N": "1"}  # type: ignore[index]
    assert _item(backend, "b", "new") is None


def test_an_invalid_update_in_a_transaction_changes_nothing(backend: Backend) -> None:
    table = backend.settings.table
    actions = [
        _put(backend, "d", "one"),
        {
            "Update": {
                "TableName": table,
                "Key": {"pk": {"S": "d"}, "sk": {"S": "two"}},
                "UpdateExpression": "SET n = n + :one",  # n does not exist yet: invalid
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
    ]
    with pytest.raises(ClientError):
        backend.dynamodb.transact_write_items(TransactItems=actions)
    assert _item(backend, "d", "one") is None


def test_an_append_with_an_oversized_producer_key_commits_nothing(backend: Backend) -> None:
    """Below the HTTP layer's limits: the store refuses a producer key DynamoDB would refuse,
    and neither the data nor the tail of that append appear."""
    store = backend.store
    store.create("s", CreateSpec("text/plain"))
    store.recent.forget("s")
    claim = ProducerClaim("p" * 1100, 0, 0)
    with pytest.raises(ValueError, match="sort key over 1024 bytes"):
        store.append("s", AppendIntent("text/plain", True, False, producer=claim), Payload(b"x"))
    info = store.get("s")
    assert info is not None and info.tail == 0
    assert _item(backend, f"d#{info.incarnation}", items.chunk_sort_key(1)) is None
