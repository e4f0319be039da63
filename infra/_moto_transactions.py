"""A cheaper TransactWriteItems for the embedded emulator.

moto snapshots every table a transaction touches with `copy.deepcopy` so it can roll back,
which makes each transaction cost O(table size): a long test run slows to a crawl. Under the
emulator's global lock nothing else runs during a request, so it is enough to check every
condition first and apply the writes only when all of them hold: the same all-or-nothing
result, at the cost of the items involved.
"""

from __future__ import annotations

from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend

_OPERATIONS = {"ConditionCheck", "Put", "Delete", "Update"}


def _key_of(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = op["Item"][table.range_key_attr]
    return key


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    seen: set[tuple[str, str]] = set()
    errors: list[tuple[Any, Any, Any]] = []
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
        condition = op.get("ConditionExpression")
        if condition is not None:
            current = self.get_item(op["TableName"], key)
            check = get_filter_expression(
                condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            )
            if not check.expr(current):
                errors.append(("ConditionalCheckFailed", "The conditional request failed", None))
                continue
        errors.append((None, None, None))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    for entry in transact_items:
        op_type, op = next(iter(entry.items()))
        names = op.get("ExpressionAttributeNames")
        values = op.get("ExpressionAttributeValues")
        if op_type == "Put":
            self.put_item(op["TableName"], op["Item"])
        elif op_type == "Delete":
            self.delete_item(op["TableName"], _key_of(self, op_type, op))
        elif op_type == "Update":
            self.update_item(
                op["TableName"],
                _key_of(self, op_type, op),
                update_expression=op["UpdateExpression"],
                expression_attribute_names=names,
                expression_attribute_values=values,
            )


def install() -> None:
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
