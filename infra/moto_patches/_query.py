"""A Query that reads one partition, for the embedded emulator.

moto answers a table Query by walking every item of the table, comparing each one's key
through its generic type machinery, then deep-copying the page: a catch-up read gets slower
with every stream anyone ever wrote. This Query looks up the one partition, orders its string
sort keys as DynamoDB does (by code point, which is UTF-8 byte order; the order is kept between
calls while the partition's keys stay the same, see `_ordered`), starts at the exclusive start
key by bisection, and applies the same rules as moto's: the key condition, Limit and the 1 MB
page, then the filter and the projection (top-level attributes projected one by one, see
`project`), measuring items as moto does but without its generic walk. Anything else (an
index, a number or binary sort key, legacy `KeyConditions` filters, a multi-attribute key, a
start key without a string sort key) goes to moto's own Query. `page` also serves the Query of
`_item_requests`.
`tests/integration/test_emulator_fast_paths.py` runs both on the same tables and compares them.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models.dynamo_type import (
    DynamoType,
    Item,
    LimitedSizeDict,
    deserializer,
    serializer,
)
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


class _Order:
    """A partition's keys in order: `sort_keys` (the string sort keys, ascending) and
    `dict_keys` (the partition dict's keys, alongside), made when the dict's own keys were
    `dict_order` (in the dict's order). While they still are, no key has come or gone, and the
    order holds (items replaced under a key are looked up afresh)."""

    __slots__ = ("dict_keys", "dict_order", "sort_keys")

    def __init__(self, dict_order: list[Any], sort_keys: list[str], dict_keys: list[Any]):
        self.dict_order = dict_order
        self.sort_keys = sort_keys
        self.dict_keys = dict_keys


# The order of each partition queried lately, by the partition dict's id (a dict made later
# under a freed one's id is checked like any other: its keys in its own order must match).
# Sorting a partition of a few thousand chunk items for every page held the emulator's lock
# for milliseconds a page: the sealer reads such a partition 50 items at a time.
_ORDERS: dict[int, _Order] = {}
_MOST_ORDERS = 1024


def _ordered(partition: dict[DynamoType, Item]) -> tuple[list[str], list[Any]]:
    """The partition's sort keys in order and its dict keys alongside. Items are only ever
    added at the end of a dict's order: if the keys known before are still its first ones, the
    new ones are merged in; if any went, the partition is sorted afresh."""
    if not partition:
        return [], []
    current = list(partition)
    order = _ORDERS.get(id(partition))
    if order is not None and order.dict_order == current:
        return order.sort_keys, order.dict_keys
    known = 0 if order is None else len(order.dict_order)
    if order is not None and len(current) > known and current[:known] == order.dict_order:
        sort_keys, dict_keys = order.sort_keys, order.dict_keys
        for key in current[known:]:
            text = str(key.value)
            at = bisect.bisect_right(sort_keys, text)
            sort_keys.insert(at, text)
            dict_keys.insert(at, key)
    else:
        pairs = sorted(((str(key.value), key) for key in current), key=lambda pair: pair[0])
        sort_keys = [text for text, _ in pairs]
        dict_keys = [key for _, key in pairs]
    if order is None and len(_ORDERS) >= _MOST_ORDERS:
        _ORDERS.pop(next(iter(_ORDERS)))
    _ORDERS[id(partition)] = _Order(current, sort_keys, dict_keys)
    return sort_keys, dict_keys


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
    less the largest item."""
    sort_keys, dict_keys = _ordered(partition)
    if forward:
        first = 0 if start is None else bisect.bisect_right(sort_keys, start)
        positions = range(first, len(sort_keys))
    else:
        after = len(sort_keys) if start is None else bisect.bisect_left(sort_keys, start)
        positions = range(after - 1, -1, -1)
    results: list[Item] = []
    size = 0
    for position in positions:
        key = sort_keys[position]
        item = partition[dict_keys[position]]
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
        results = [project(item, projection_expressions) for item in results]
    return results, scanned, last_evaluated_key


def project(item: Item, expressions: list[list[str]]) -> Item:
    """moto's projection of a stored item, which must not be handed out to be changed (moto
    copies it first). moto's projection converts the whole item to plain values once per
    expression, and copying it first doubled that: 0.1 to 0.3 ms an item, so the sealer's
    listing of a stream's few thousand chunks (a 1 KiB body each) held the emulator's lock for
    a third of a second. Where every expression names a top-level attribute, whose projection
    depends on that attribute alone, each named attribute goes through the same conversions
    (to a plain value and back), once, into a new item: what moto's projection answers."""
    if not all(len(path) == 1 and "[" not in path[0] for path in expressions):
        return copy.deepcopy(item).project(expressions)
    attributes = {}
    for (name,) in expressions:
        value = item.attrs.get(name)
        if value is not None and name not in attributes:
            plain = deserializer.deserialize(value.to_regular_json())
            attributes[name] = DynamoType(serializer.serialize(plain))
    projected = Item.__new__(Item)  # Item() would weigh the item again for every attribute
    projected.hash_key = item.hash_key
    projected.range_key = item.range_key
    projected.attrs = LimitedSizeDict(attributes)
    return projected


def observe(observer: Callable[[Table], None] | None) -> None:
    """Tell `observer` of every Query left to moto's own, with its table (None: no one):
    `tests/integration/test_store_fast_paths.py` finds the store's with it."""
    global _observer
    _observer = observer


def install() -> None:
    Table.query = query  # type: ignore[method-assign]


def uninstall() -> None:
    Table.query = _moto_query  # type: ignore[method-assign]
