"""A Query that reads one partition, for the embedded emulator.

moto answers a table Query by walking every item of the table, comparing each one's key
through its generic type machinery, then deep-copying the page: a catch-up read gets slower
with every stream anyone ever wrote. This Query looks up the one partition, orders its string
sort keys as DynamoDB does (by code point, which is UTF-8 byte order), and applies the same
rules as moto's: the key condition, the exclusive start key, Limit and the 1 MB page, then the
filter and the projection. Anything else (an index, a number or binary sort key, legacy
`KeyConditions` filters, a multi-attribute key) goes to moto's own Query.
`tests/integration/test_emulator_fast_paths.py` runs both on the same tables and compares them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models.dynamo_type import DynamoType, Item, serializer
from moto.dynamodb.models.table import RESULT_SIZE_LIMIT, Table

_moto_query = Table.query
# Told of each Query left to moto's own (`observe`).
_observer: Callable[[Table], None] | None = None

_RANGE_TESTS: dict[str, Callable[..., bool]] = {
    "=": lambda key, value: key == value,
    "EQ": lambda key, value: key == value,
    "<": lambda key, value: key < value,
    "LT": lambda key, value: key < value,
    "<=": lambda key, value: key <= value,
    "LE": lambda key, value: key <= value,
    ">": lambda key, value: key > value,
    "GT": lambda key, value: key > value,
    ">=": lambda key, value: key >= value,
    "GE": lambda key, value: key >= value,
    "BETWEEN": lambda key, low, high: low <= key <= high,
    "BEGINS_WITH": lambda key, prefix: key.startswith(prefix),
}


def _handled(
    table: Table,
    hash_key: DynamoType | None,
    range_comparison: str | None,
    range_objs: list[DynamoType],
    index_name: str | None,
    range_key_conditions: list[Any] | None,
    filter_kwargs: dict[str, Any],
) -> bool:
    return (
        hash_key is not None
        and index_name is None
        and not filter_kwargs
        and table.range_key_attr is not None
        and table.range_key_type == "S"
        and len(range_key_conditions or ()) <= 1
        and (range_comparison is None or range_comparison in _RANGE_TESTS)
        and all(obj.type == "S" for obj in range_objs)
    )


def _sort_key(item: Item) -> str:
    return str(item.range_key.value)  # type: ignore[union-attr]


def _start_key(table: Table, exclusive_start_key: dict[str, Any] | None) -> str | None:
    if not exclusive_start_key:
        return None
    return str(exclusive_start_key[table.range_key_attr]["S"])


def query(
    self: Table,
    hash_key: DynamoType | None,
    range_comparison: str | None,
    range_objs: list[DynamoType],
    limit: int,
    exclusive_start_key: dict[str, Any],
    scan_index_forward: bool,
    projection_expressions: list[list[str]] | None,
    index_name: str | None = None,
    consistent_read: bool = False,
    filter_expression: Any = None,
    hash_key_conditions: list[tuple[str, DynamoType]] | None = None,
    range_key_conditions: list[tuple[str, str, list[DynamoType]]] | None = None,
    **filter_kwargs: Any,
) -> tuple[list[Item], int, dict[str, Any] | None]:
    if not _handled(
        self,
        hash_key,
        range_comparison,
        range_objs,
        index_name,
        range_key_conditions,
        filter_kwargs,
    ):
        if _observer is not None:
            _observer(self)
        return _moto_query(
            self,
            hash_key,
            range_comparison,
            range_objs,
            limit,
            exclusive_start_key,
            scan_index_forward,
            projection_expressions,
            index_name=index_name,
            consistent_read=consistent_read,
            filter_expression=filter_expression,
            hash_key_conditions=hash_key_conditions,
            range_key_conditions=range_key_conditions,
            **filter_kwargs,
        )
    partition: dict[DynamoType, Item] = self.items.get(hash_key) or {}
    ordered = sorted(partition.values(), key=_sort_key)
    start = _start_key(self, exclusive_start_key)
    forward = scan_index_forward is not False
    if not forward:
        ordered.reverse()
    test = _RANGE_TESTS[range_comparison] if range_comparison else None
    bounds = [obj.value for obj in range_objs]

    results: list[Item] = []
    size = 0
    last_evaluated_key = None
    for item in ordered:
        key = item.range_key.value  # type: ignore[union-attr]
        if start is not None and (key <= start if forward else key >= start):
            continue
        # As moto does: once a page has items, the next item in key order ends it when the
        # page is full, whether or not that item matches.
        if results and (len(results) == limit or size + item.size() > RESULT_SIZE_LIMIT):
            last_evaluated_key = self._get_last_evaluated_key(results[-1], None)
            break
        if test is not None and not test(key, *bounds):
            continue
        results.append(item)
        size += item.size()
    scanned = len(results)
    if filter_expression is not None:
        results = [item for item in results if filter_expression.expr(item)]
    if projection_expressions:
        results = [_project(item, projection_expressions) for item in results]
    return results, scanned, last_evaluated_key


def _project(item: Item, expressions: list[list[str]]) -> Item:
    """moto's projection of a stored item, which must not be handed out to be changed (moto
    copies it first). moto's projection converts the whole item to plain values, once per
    expression, and copying it first doubled that: 0.3 ms an item for the sealer's listing of
    chunks (a 1 KiB body each), a third of a second for a stream's few thousand chunks, with
    the emulator's lock held. Where every expression names a top-level attribute, whose
    projection depends on that attribute alone, the same projection runs on an item of just
    those attributes, converted once (shared, not copied: converting builds new values and
    changes nothing)."""
    if not all(len(path) == 1 and "[" not in path[0] for path in expressions):
        return copy.deepcopy(item).project(expressions)
    reduced = copy.copy(item)
    reduced.attrs = {  # type: ignore[assignment]
        path[0]: item.attrs[path[0]] for path in expressions if path[0] in item.attrs
    }
    attributes = serializer.serialize(reduced.to_regular_json())["M"]
    return Item(hash_key=item.hash_key, range_key=item.range_key, attrs=attributes)


def observe(observer: Callable[[Table], None] | None) -> None:
    """Tell `observer` of every Query left to moto's own, with its table (None: no one):
    `tests/integration/test_store_fast_paths.py` finds the store's with it."""
    global _observer
    _observer = observer


def install() -> None:
    Table.query = query  # type: ignore[method-assign]


def uninstall() -> None:
    Table.query = _moto_query  # type: ignore[method-assign]
