"""A Query that reads one partition, for the embedded emulator.

moto answers a table Query by walking every item of the table, comparing each one's key
through its generic type machinery, then deep-copying the page: a catch-up read gets slower
with every stream anyone ever wrote. This Query looks up the one partition, orders its string
sort keys as DynamoDB does (by code point, which is UTF-8 byte order), and applies the same
rules as moto's: the key condition, the exclusive start key, Limit and the 1 MB page, then the
filter and the projection, sorting only the items after the start key and measuring items
as moto does but without its generic walk. Anything else (an index, a number or binary sort
key, legacy `KeyConditions` filters, a multi-attribute key, a start key without a string sort
key) goes to moto's own Query. `page` also serves the Query of `_item_requests`.
`tests/integration/test_emulator_fast_paths.py` runs both on the same tables and compares them.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models.dynamo_type import DynamoType, Item
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


# moto refuses to store an item larger than this, by the measure its `Item.size` takes (its
# `LimitedSizeDict` checks every attribute set): no stored item is larger.
MAX_ITEM_SIZE = 405_000


def key_test(comparison: str | None, operands: tuple[str, ...]) -> Callable[[str], bool] | None:
    """The test of a sort key by moto's name for the comparison (None: every key passes)."""
    if comparison is None:
        return None
    test = _RANGE_TESTS[comparison]
    return lambda key: test(key, *operands)


def _text_size(text: str | bytes) -> int:
    return len(text) if isinstance(text, bytes) or text.isascii() else len(text.encode())


def item_size(item: Item) -> int:
    """`item.size()`, as moto measures an item (names and values in bytes, binary values as
    it keeps them, numbers as their text), with strings and binary values measured here:
    moto's generic walk over each value was most of a large Query's time."""
    size = 0
    for name, value in item.attrs.items():
        kind = value.type
        if kind == "S" or kind == "B":
            size += _text_size(name) + _text_size(value.value)
        else:
            size += _text_size(name) + value.size()
    return size


def page(
    table: Table,
    partition: dict[DynamoType, Item],
    start: str | None,
    forward: bool,
    matches: Callable[[str], bool] | None,
    limit: int | None,
) -> tuple[list[Item], dict[str, Any] | None]:
    """One page of a Query of `partition` (string sort keys) as moto answers it: the items
    after `start` in key order that `matches` keeps, ended by `limit` or by moto's 1 MB rule,
    and the key to go on from (None: nothing after them).

    moto's rule: once a page has items, the next item in key order, matching or not, ends it
    when the page is full. The matching items are consecutive in key order, so once the page
    has items, one that does not match means the rest do not either; they still end the page
    if one of them would not fit in it, which no item can while the page holds less than 1 MB
    less the largest item. Only the items after `start` are sorted."""
    # Items, not (key, item) pairs: a page of a large partition would allocate a pair per
    # item, enough to set off the cyclic collector's passes over all of moto's objects.
    if start is None:
        after = list(partition.values())
    elif forward:
        after = [item for key, item in partition.items() if key.value > start]
    else:
        after = [item for key, item in partition.items() if key.value < start]
    after.sort(key=_sort_key, reverse=not forward)
    results: list[Item] = []
    size = 0
    for item in after:
        key = item.range_key.value  # type: ignore[union-attr]
        if results:
            if len(results) == limit:
                return results, table._get_last_evaluated_key(results[-1], None)
            past = matches is not None and not matches(key)
            if past and size + MAX_ITEM_SIZE <= RESULT_SIZE_LIMIT:
                break
            item_bytes = item_size(item)
            if size + item_bytes > RESULT_SIZE_LIMIT:
                return results, table._get_last_evaluated_key(results[-1], None)
            if past:
                continue
        elif matches is not None and not matches(key):
            continue
        else:
            item_bytes = item_size(item)
        results.append(item)
        size += item_bytes
    return results, None


_sort_key = operator.attrgetter("range_key.value")


def _usable_start(table: Table, exclusive_start_key: dict[str, Any] | None) -> bool:
    """No start key, or one naming a string sort key (moto has its own answer to others)."""
    if not exclusive_start_key:
        return True
    value = exclusive_start_key.get(table.range_key_attr)  # type: ignore[arg-type]
    return isinstance(value, dict) and isinstance(value.get("S"), str)


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
    ) or not _usable_start(self, exclusive_start_key):
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
    results, last_evaluated_key = page(
        self,
        partition,
        start=_start_key(self, exclusive_start_key),
        forward=scan_index_forward is not False,
        matches=key_test(range_comparison, tuple(obj.value for obj in range_objs)),
        limit=limit,
    )
    scanned = len(results)
    if filter_expression is not None:
        results = [item for item in results if filter_expression.expr(item)]
    if projection_expressions:
        # moto's projection builds new items; the stored ones must not be handed out to be
        # changed, which is why moto copies them.
        results = [copy.deepcopy(item).project(projection_expressions) for item in results]
    return results, scanned, last_evaluated_key


def observe(observer: Callable[[Table], None] | None) -> None:
    """Tell `observer` of every Query left to moto's own, with its table (None: no one):
    `tests/integration/test_store_fast_paths.py` finds the store's with it."""
    global _observer
    _observer = observer


def install() -> None:
    Table.query = query  # type: ignore[method-assign]


def uninstall() -> None:
    Table.query = _moto_query  # type: ignore[method-assign]
