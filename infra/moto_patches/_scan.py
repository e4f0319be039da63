"""A Scan that starts where the last page ended, for the embedded emulator.

moto answers every page of a table Scan by sorting the whole table (comparing keys through its
generic type machinery), walking it from the start to the exclusive start key, and
deep-copying every item of the page before the filter drops most of them: a page of the
collector's scan for deleted and expired streams (`core.storage.gc`) held the emulator's lock
for 60 to 160 ms, and a `Limit` made pages shorter but not cheaper. This Scan orders the
partitions by their string hash keys (and each partition by its string sort keys, kept between
calls by the Query's `_ordered`), starts at the exclusive start key by bisection, reads the page
as moto does (the item `Limit` and the 1 MB page count every item read, before the filter),
and copies only the items the filter keeps. Anything else (an index, parallel segments, legacy
`ScanFilter` conditions, a key that is not a string) goes to moto's own Scan.
`tests/integration/test_emulator_fast_paths.py` runs both on the same tables and compares them.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Iterator
from typing import Any

from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import RESULT_SIZE_LIMIT, Table

from ._query import _ordered, project

_moto_scan = Table.scan


def _handled(
    table: Table,
    filters: dict[str, Any],
    index_name: str | None,
    segments: tuple[Any, Any],
) -> bool:
    return (
        not filters
        and index_name is None
        and segments == (None, None)
        and table.range_key_attr is not None
        and table.hash_key_type == "S"
        and table.range_key_type == "S"
    )


def _partitions_from(
    table: Table, start: tuple[str, str] | None
) -> Iterator[tuple[dict[DynamoType, Item], list[str], list[Any], int]]:
    """Each partition in key order from the one holding `start` on: the partition, its sort
    keys and dict keys in order (`_ordered`), and where to begin in them."""
    partitions = sorted(
        (str(hash_key.value), partition)
        for hash_key, partition in table.items.items()
        if partition  # an emptied partition reads as nothing, as in moto
    )
    hash_keys = [hash_value for hash_value, _ in partitions]
    first = 0 if start is None else bisect.bisect_left(hash_keys, start[0])
    for index in range(first, len(partitions)):
        hash_value, partition = partitions[index]
        sort_keys, dict_keys = _ordered(partition)
        begin = 0
        if start is not None and hash_value == start[0]:
            begin = bisect.bisect_right(sort_keys, start[1])
        yield partition, sort_keys, dict_keys, begin


def scan(
    self: Table,
    filters: dict[str, Any],
    limit: int,
    exclusive_start_key: dict[str, Any],
    filter_expression: Any = None,
    index_name: str | None = None,
    consistent_read: bool = False,
    projection_expression: list[list[str]] | None = None,
    segments: tuple[Any, Any] = (None, None),
) -> tuple[list[Item], int, dict[str, Any] | None]:
    if not _handled(self, filters, index_name, segments):
        return _moto_scan(
            self,
            filters,
            limit,
            exclusive_start_key,
            filter_expression=filter_expression,
            index_name=index_name,
            consistent_read=consistent_read,
            projection_expression=projection_expression,
            segments=segments,
        )
    start = None
    if exclusive_start_key:
        assert self.range_key_attr is not None
        start = (
            str(exclusive_start_key[self.hash_key_attr]["S"]),
            str(exclusive_start_key[self.range_key_attr]["S"]),
        )
    read: list[Item] = []
    size = 0
    last_evaluated_key = None
    for partition, sort_keys, dict_keys, begin in _partitions_from(self, start):
        for position in range(begin, len(sort_keys)):
            item = partition[dict_keys[position]]
            weight = item.size()
            # As moto does: the item that would pass the Limit or the 1 MB ends the page.
            if len(read) == limit or size + weight > RESULT_SIZE_LIMIT:
                last_evaluated_key = self._get_last_evaluated_key(read[-1], None)
                break
            read.append(item)
            size += weight
        if last_evaluated_key is not None:
            break
    kept = read if filter_expression is None else [i for i in read if filter_expression.expr(i)]
    if projection_expression:
        results = [project(item, projection_expression) for item in kept]
    else:
        # The stored items must not be handed out to be changed, which is why moto copies.
        results = [copy.deepcopy(item) for item in kept]
    return results, len(read), last_evaluated_key


def install() -> None:
    Table.scan = scan  # type: ignore[method-assign]


def uninstall() -> None:
    Table.scan = _moto_scan  # type: ignore[method-assign]
