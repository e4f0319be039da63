"""A cheaper TransactWriteItems for the embedded emulator, all-or-nothing like DynamoDB's.

moto snapshots every table a transaction touches with `copy.deepcopy` so it can roll back,
which makes each transaction cost O(table size): a long test run slows to a crawl. Under the
emulator's global lock nothing else runs during a request, so it is enough to check every
condition first, then apply the writes with a copy of just the items they touch: if any write
fails (a key too large, an invalid update, anything), the items written so far are put back and
the error is raised, so a failed transaction changes nothing, as in DynamoDB.
"""

from __future__ import annotations

import copy
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

_moto_transact_write_items = DynamoDBBackend.transact_write_items
_OPERATIONS = {"ConditionCheck", "Put", "Delete", "Update"}


def _key_of(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = op["Item"][table.range_key_attr]
    return key


class _Snapshot:
    """Copies of the items a transaction is about to write, to put back if it fails."""

    def __init__(self) -> None:
        self._saved: list[tuple[Table, DynamoType, DynamoType | None, Any]] = []

    def save(self, table: Table, key: dict[str, Any]) -> None:
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = (
            DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        )
        current = table.get_item(hash_value, range_value)
        self._saved.append((table, hash_value, range_value, copy.deepcopy(current)))

    def restore(self) -> None:
        for table, hash_value, range_value, item in reversed(self._saved):
            if item is None:
                table.delete_item(hash_value, range_value)
            elif range_value is not None:
                table.items[hash_value][range_value] = item
            else:
                table.items[hash_value] = item


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    seen: set[tuple[str, str]] = set()
    errors: list[tuple[Any, Any, Any]] = []
    writes: list[tuple[str, dict[str, Any], dict[str, Any]]] = []  # (operation, request, key)
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(entry.items()))
        if op_type not in _OPERATIONS:
            raise ValueError("Unsupported transaction operation")
        key = _key_of(self, op_type, op)
        identity = (op["TableName"], str(sorted(key.items())))
        if identity in seen:
            raise MultipleTransactionsException()
        seen.add(identity)
        if op_type != "ConditionCheck":
            writes.append((op_type, op, key))
        condition = op.get("ConditionExpression")
        if condition is not None:
            current = self.get_item(op["TableName"], key)
            check = get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            )
            if not check.expr(current):
                # As DynamoDB (and moto's own transaction): the item as it was, when asked.
                wanted = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                found = current.to_json()["Attributes"] if wanted and current else None
                errors.append(("ConditionalCheckFailed", "The conditional request failed", found))
                continue
        errors.append((None, None, None))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    snapshot = _Snapshot()
    try:
        for op_type, op, key in writes:
            snapshot.save(self.get_table(op["TableName"]), key)
            if op_type == "Put":
                self.put_item(op["TableName"], op["Item"])
            elif op_type == "Delete":
                self.delete_item(op["TableName"], key)
            else:
                self.update_item(
                    op["TableName"],
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=op.get("ExpressionAttributeNames"),
                    expression_attribute_values=op.get("ExpressionAttributeValues"),
                )
    except BaseException:
        snapshot.restore()
        raise


def install() -> None:
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def uninstall() -> None:
    DynamoDBBackend.transact_write_items = _moto_transact_write_items  # type: ignore[method-assign]
