"""The emulator's fast paths answer exactly what moto's own code answers: every request here
runs twice on the same data, with the fast paths and without, and the parsed answers (what
the store sees) must be equal."""

from __future__ import annotations

import copy
import functools
import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from emulator_support import in_process_dynamodb, use_fast_paths

from durable_streams_aws.infra.moto_patches import _item_requests, _query, _scan


@pytest.fixture(scope="module")
def dynamodb() -> Iterator[Any]:
    yield in_process_dynamodb()


def answer(call: Callable[[], Any], fast: bool) -> Any:
    """What `call` answers with the fast paths or with moto's own code; an error's class and
    message count as the answer."""
    use_fast_paths(fast)
    try:
        answered = call()
        answered.pop("ResponseMetadata", None)
        return answered
    except Exception as error:
        return type(error).__name__, str(error)
    finally:
        use_fast_paths(True)


def both_ways(call: Callable[[], Any]) -> tuple[Any, Any]:
    return answer(call, fast=True), answer(call, fast=False)


def make_table(client: Any, range_type: str = "S") -> str:
    name = f"fast-{uuid.uuid4().hex[:10]}"
    client.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": range_type},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@pytest.fixture(scope="module")
def table(dynamodb: Any) -> str:
    """Partitions of string keys in no particular order of writing, with binary, number,
    set, list and map values; one partition with items large enough to fill 1 MB pages."""
    name = make_table(dynamodb)
    keys = [f"c#{n:04}" for n in range(40)] + ["meta", "p#a", "p#b", "c#", "ü", "Z"]
    for number, key in enumerate(sorted(keys, key=lambda k: hash(k) % 97)):
        for partition in ("a", "b"):
            dynamodb.put_item(
                TableName=name,
                Item={
                    "pk": {"S": partition},
                    "sk": {"S": key},
                    "data": {"B": bytes([number % 256]) * (number % 7)},
                    "n": {"N": str(number)},
                    "tags": {"SS": ["x", f"t{number}"]},
                    "nested": {"M": {"l": {"L": [{"N": "1"}, {"BOOL": number % 2 == 0}]}}},
                },
            )
    for number in range(9):
        dynamodb.put_item(
            TableName=name,
            Item={"pk": {"S": "big"}, "sk": {"S": f"{number}"}, "data": {"B": b"x" * 300_000}},
        )
    return name


KEY_CONDITIONS: list[tuple[str, dict[str, Any]]] = [
    ("pk = :p", {}),
    ("pk = :p AND sk = :a", {":a": {"S": "c#0005"}}),
    ("pk = :p AND sk > :a", {":a": {"S": "c#0010"}}),
    ("pk = :p AND sk >= :a", {":a": {"S": "c#0010"}}),
    ("pk = :p AND sk < :a", {":a": {"S": "c#0010"}}),
    ("pk = :p AND sk <= :a", {":a": {"S": "meta"}}),
    ("pk = :p AND sk BETWEEN :a AND :b", {":a": {"S": "c#0003"}, ":b": {"S": "c#0030"}}),
    ("pk = :p AND begins_with(sk, :a)", {":a": {"S": "p#"}}),
    ("pk = :p AND sk > :a", {":a": {"S": "zzz"}}),
]


@pytest.mark.parametrize(
    ("condition", "values", "limit", "forward", "extra"),
    [
        (condition, values, limit, forward, extra)
        for (condition, values), limit, forward, extra in itertools.product(
            KEY_CONDITIONS,
            [None, 1, 3, 40],
            [True, False],
            [
                {},
                {"ProjectionExpression": "sk, #n", "ExpressionAttributeNames": {"#n": "n"}},
                # Top-level names of every type, and one no item has: projected from those
                # attributes alone; a nested path: projected as moto does, from the whole item.
                {
                    "ProjectionExpression": "pk, sk, #d, tags, nested, absent, #n",
                    "ExpressionAttributeNames": {"#d": "data", "#n": "n"},
                },
                {
                    "ProjectionExpression": "sk, nested.l[1], #d",
                    "ExpressionAttributeNames": {"#d": "data"},
                },
                {"FilterExpression": "n > :ten"},
            ],
        )
    ],
)
def test_query_pages_are_moto_s(
    dynamodb: Any,
    table: str,
    condition: str,
    values: dict[str, Any],
    limit: int | None,
    forward: bool,
    extra: dict[str, Any],
) -> None:
    request: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": {":p": {"S": "a"}, **values},
        "ScanIndexForward": forward,
        **extra,
    }
    if "FilterExpression" in extra:
        request["ExpressionAttributeValues"][":ten"] = {"N": "10"}
    if limit is not None:
        request["Limit"] = limit
    for _ in range(60):  # every page, following LastEvaluatedKey
        fast, moto = both_ways(lambda: dynamodb.query(**request))
        assert fast == moto
        if "LastEvaluatedKey" not in fast:
            return
        request["ExclusiveStartKey"] = fast["LastEvaluatedKey"]
    raise AssertionError("more pages than items")


def test_query_pages_stay_moto_s_as_items_come_go_and_change(dynamodb: Any) -> None:
    """The fast Query keeps each partition's order between calls and merges new keys into it
    (`_ordered`): pages read while items are added (in and out of key order), deleted,
    deleted and put back, and replaced must still be moto's."""
    name = make_table(dynamodb)

    def put(key: str, value: str = "v") -> None:
        item = {"pk": {"S": "p"}, "sk": {"S": key}, "v": {"S": value}}
        dynamodb.put_item(TableName=name, Item=item)

    def delete(key: str) -> None:
        dynamodb.delete_item(TableName=name, Key={"pk": {"S": "p"}, "sk": {"S": key}})

    def pages_agree() -> None:
        for condition, values in KEY_CONDITIONS:
            for forward in (True, False):
                request: dict[str, Any] = {
                    "TableName": name,
                    "KeyConditionExpression": condition,
                    "ExpressionAttributeValues": {":p": {"S": "p"}, **values},
                    "ScanIndexForward": forward,
                    "Limit": 4,
                }
                for _ in range(60):
                    fast, moto = both_ways(functools.partial(dynamodb.query, **request))
                    assert fast == moto, (condition, forward)
                    if "LastEvaluatedKey" not in fast:
                        break
                    request["ExclusiveStartKey"] = fast["LastEvaluatedKey"]

    for number in range(0, 40, 2):
        put(f"c#{number:04}")
    pages_agree()
    for number in (41, 1, 17, 3):  # new keys, after and among the known ones
        put(f"c#{number:04}")
        pages_agree()
    delete("c#0010")
    pages_agree()
    put("c#0010")  # back, now last in the partition's own order
    pages_agree()
    put("c#0017", "replaced")  # same key, new item
    pages_agree()
    for key in ("meta", "p#a", "ü", "c#"):
        put(key)
    pages_agree()


def test_paging_through_a_partition_sorts_it_once_and_copies_no_item_whole(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sealer lists a stream's chunks 20 at a time on the embedded emulator (five
    top-level attributes each): every page sorted the whole partition and deep-copied each item
    it projected, which held the emulator's lock for up to 384 ms a page."""
    name = make_table(dynamodb)
    for number in range(300):
        item = {"pk": {"S": "d"}, "sk": {"S": f"c#{number:016}"}, "st": {"N": str(number)}}
        dynamodb.put_item(TableName=name, Item={**item, "b": {"B": b"x" * 1024}})
    sorts: list[int] = []
    copies: list[int] = []

    def counted_sorted(values: Any, **options: Any) -> Any:
        ordered = sorted(values, **options)
        sorts.append(len(ordered))
        return ordered

    def counted_deepcopy(value: Any) -> Any:
        copies.append(1)
        return copy.deepcopy(value)

    monkeypatch.setattr(_query, "sorted", counted_sorted, raising=False)
    monkeypatch.setattr(_query, "copy", SimpleNamespace(deepcopy=counted_deepcopy, copy=copy.copy))
    request: dict[str, Any] = {
        "TableName": name,
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :c)",
        "ExpressionAttributeValues": {":p": {"S": "d"}, ":c": {"S": "c#"}},
        "ProjectionExpression": "sk, #st, #k, #pg, #v",
        "ExpressionAttributeNames": {"#st": "st", "#k": "k", "#pg": "pg", "#v": "v"},
        "Limit": 20,
    }
    listed = 0
    for _ in range(20):
        page = dynamodb.query(**request)
        listed += len(page["Items"])
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        # An append meanwhile: a new key, merged into the known order rather than a sort.
        key = {"pk": {"S": "d"}, "sk": {"S": f"c#{10_000 + listed:016}"}}
        dynamodb.put_item(TableName=name, Item=key)
    assert listed > 300
    assert sorts == [300] and copies == []


def _scan_pages_agree(dynamodb: Any, request: dict[str, Any]) -> int:
    """Every page of a Scan, following LastEvaluatedKey, fast and moto's alike; how many."""
    request = dict(request)
    for pages in range(1, 200):
        fast, moto = both_ways(functools.partial(dynamodb.scan, **request))
        assert fast == moto, request
        if "LastEvaluatedKey" not in fast:
            return pages
        request["ExclusiveStartKey"] = fast["LastEvaluatedKey"]
    raise AssertionError("more pages than items")


@pytest.mark.parametrize(
    ("limit", "extra"),
    [
        (limit, extra)
        for limit, extra in itertools.product(
            [None, 1, 3, 40],
            [
                {},
                {
                    "FilterExpression": "n > :ten",
                    "ExpressionAttributeValues": {":ten": {"N": "10"}},
                },
                {
                    "ProjectionExpression": "pk, sk, #d, tags, absent",
                    "ExpressionAttributeNames": {"#d": "data"},
                },
                {
                    "ProjectionExpression": "sk, nested.l[1]",
                    "FilterExpression": "attribute_exists(n) AND sk >= :c",
                    "ExpressionAttributeValues": {":c": {"S": "c#0020"}},
                },
            ],
        )
    ],
)
def test_scan_pages_are_moto_s(
    dynamodb: Any, table: str, limit: int | None, extra: dict[str, Any]
) -> None:
    """Pages of every size (the 1 MB page among them: the "big" partition), filtered and
    projected, over partitions of string keys in no particular order of writing."""
    request: dict[str, Any] = {"TableName": table, **extra}
    if limit is not None:
        request["Limit"] = limit
    _scan_pages_agree(dynamodb, request)


def test_scan_pages_stay_moto_s_as_items_come_and_go(dynamodb: Any) -> None:
    """Pages read while items are added to partitions old and new, deleted (a partition
    emptied among them) and replaced, as the collector's scan meets them beside appends."""
    name = make_table(dynamodb)

    def put(pk: str, sk: str, value: str = "v") -> None:
        item = {"pk": {"S": pk}, "sk": {"S": sk}, "v": {"S": value}}
        dynamodb.put_item(TableName=name, Item=item)

    def delete(pk: str, sk: str) -> None:
        dynamodb.delete_item(TableName=name, Key={"pk": {"S": pk}, "sk": {"S": sk}})

    def agree() -> None:
        for limit in (2, 5, None):
            request: dict[str, Any] = {
                "TableName": name,
                "FilterExpression": "sk = :meta OR v = :r",
                "ExpressionAttributeValues": {":meta": {"S": "meta"}, ":r": {"S": "replaced"}},
            }
            if limit is not None:
                request["Limit"] = limit
            _scan_pages_agree(dynamodb, request)

    for pk in ("s#b", "d#1", "s#a", "sq#0"):
        for number in range(0, 12, 3):
            put(pk, f"c#{number:04}")
        put(pk, "meta")
    agree()
    put("d#1", "c#0001")
    put("d#0", "c#0005")  # a new partition, before the others
    agree()
    for number in range(0, 12, 3):
        delete("sq#0", f"c#{number:04}")
    delete("sq#0", "meta")  # emptied
    delete("s#a", "c#0003")
    agree()
    put("s#b", "c#0006", "replaced")
    agree()


def test_a_scan_page_copies_only_what_its_filter_keeps(
    dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector scans the table for a few stream items among many chunks: moto copied
    every item it read (the page of a 1 MB read held the emulator's lock up to 160 ms)."""
    name = make_table(dynamodb)
    for number in range(300):
        item = {"pk": {"S": "d#x"}, "sk": {"S": f"c#{number:016}"}, "b": {"B": b"x" * 1024}}
        dynamodb.put_item(TableName=name, Item=item)
    dynamodb.put_item(TableName=name, Item={"pk": {"S": "s#a"}, "sk": {"S": "meta"}})
    copies: list[int] = []

    def counted_deepcopy(value: Any) -> Any:
        copies.append(1)
        return copy.deepcopy(value)

    monkeypatch.setattr(_scan, "copy", SimpleNamespace(deepcopy=counted_deepcopy))
    request: dict[str, Any] = {
        "TableName": name,
        "FilterExpression": "sk = :meta",
        "ExpressionAttributeValues": {":meta": {"S": "meta"}},
        "Limit": 50,
    }
    found, pages = [], 0
    while True:
        page = dynamodb.scan(**request)
        pages += 1
        found += page["Items"]
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    assert [item["pk"]["S"] for item in found] == ["s#a"]
    assert pages == 7 and copies == [1]


def test_a_query_stops_at_a_megabyte_as_moto_does(dynamodb: Any, table: str) -> None:
    request = {
        "TableName": table,
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "big"}},
    }
    fast, moto = both_ways(lambda: dynamodb.query(**request))
    assert fast == moto and "LastEvaluatedKey" in fast and fast["Count"] < 9


def test_number_sort_keys_and_indexes_go_to_moto(dynamodb: Any) -> None:
    name = make_table(dynamodb, range_type="N")
    for number in (10, 9, 100, -1, 2.5):
        dynamodb.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"N": str(number)}})
    request = {
        "TableName": name,
        "KeyConditionExpression": "pk = :p AND sk > :a",
        "ExpressionAttributeValues": {":p": {"S": "a"}, ":a": {"N": "2"}},
    }
    fast, moto = both_ways(lambda: dynamodb.query(**request))
    assert fast == moto
    assert [item["sk"]["N"] for item in fast["Items"]] == ["2.5", "9", "10", "100"]


def test_item_operations_answer_as_moto_does(dynamodb: Any, table: str) -> None:
    key = {"pk": {"S": "ops"}, "sk": {"S": "one"}}
    item = {**key, "data": {"B": b"\x00\xff"}, "n": {"N": "1.50"}, "bs": {"BS": [b"1", b"2"]}}
    calls: list[Callable[[], Any]] = [
        lambda: dynamodb.put_item(TableName=table, Item=item, ReturnValues="ALL_OLD"),
        lambda: dynamodb.get_item(TableName=table, Key=key),
        lambda: dynamodb.get_item(TableName=table, Key={**key, "sk": {"S": "none"}}),
        lambda: dynamodb.batch_get_item(RequestItems={table: {"Keys": [key]}}),
        lambda: dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #n = #n + :one",
            ConditionExpression="#n < :ten AND attribute_exists(pk)",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":ten": {"N": "10"}},
            ReturnValues="ALL_NEW",
        ),
        lambda: dynamodb.put_item(
            TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)"
        ),
        lambda: dynamodb.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": key,
                        "ConditionExpression": "#n = :v",
                        "ExpressionAttributeNames": {"#n": "n"},
                        "ExpressionAttributeValues": {":v": {"N": "99"}},
                    }
                },
                {"Put": {"TableName": table, "Item": {**key, "sk": {"S": "two"}}}},
            ]
        ),
        lambda: dynamodb.delete_item(TableName=table, Key=key, ReturnValues="ALL_OLD"),
        lambda: dynamodb.delete_item(TableName=table, Key=key, ReturnValues="ALL_OLD"),
    ]
    # Each call runs twice, from the same starting item.
    for call in calls:
        before = dynamodb.get_item(TableName=table, Key=key).get("Item")
        fast = answer(call, fast=True)
        restore(dynamodb, table, key, before)
        assert fast == answer(call, fast=False)


def restore(dynamodb: Any, table: str, key: dict[str, Any], item: dict[str, Any] | None) -> None:
    if item is None:
        dynamodb.delete_item(TableName=table, Key=key)
    else:
        dynamodb.put_item(TableName=table, Item=item)


def test_a_cached_condition_does_not_change_with_a_stored_item(dynamodb: Any, table: str) -> None:
    """moto's parsed condition refers to the request's values; a set stored from those values
    and grown later must not change what the same condition means the next time."""
    key = {"pk": {"S": "aliasing"}, "sk": {"S": "one"}}
    put_once = {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "SET s = :s",
        "ConditionExpression": "attribute_not_exists(s) OR s = :s",
        "ExpressionAttributeValues": {":s": {"SS": ["a"]}},
    }
    dynamodb.update_item(**put_once)
    dynamodb.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="ADD s :more",
        ExpressionAttributeValues={":more": {"SS": ["z"]}},
    )
    refused = dynamodb.exceptions.ConditionalCheckFailedException
    with pytest.raises(refused):  # the set is {a, z} now, not {a}
        dynamodb.update_item(**put_once)


def test_request_ids_have_moto_s_form(dynamodb: Any, table: str) -> None:
    """A request id is unique and of moto's form, with the fast paths or without: 52 letters
    and digits."""
    key = {"pk": {"S": "ids"}, "sk": {"S": "one"}}
    for fast in (True, False):
        use_fast_paths(fast)
        try:
            ids = {
                dynamodb.get_item(TableName=table, Key=key)["ResponseMetadata"]["RequestId"]
                for _ in range(3)
            }
        finally:
            use_fast_paths(True)
        assert len(ids) == 3
        assert all(len(id) == 52 and id.isascii() and id.isalnum() for id in ids)


def test_the_store_s_queries_are_answered_by_the_fast_layer(
    dynamodb: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forms the store sends are answered without moto's web stack (and every form the
    layer does not know is left to moto): a test above could otherwise pass by never reaching
    the layer's Query."""
    answered: list[bool] = []
    handler = _item_requests._HANDLERS["Query"]

    def recording(*args: Any) -> Any:
        found = handler(*args)
        answered.append(found is not None)
        return found

    monkeypatch.setitem(_item_requests._HANDLERS, "Query", recording)
    values = {":p": {"S": "a"}, ":a": {"S": "c#0003"}, ":b": {"S": "c#0030"}}
    handled = [
        {"KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b", "Limit": 7},
        {"KeyConditionExpression": "pk = :p AND sk BETWEEN :b AND :a"},  # matches nothing
        {"KeyConditionExpression": "pk = :p AND sk > :a", "ConsistentRead": True},
        {"KeyConditionExpression": "pk = :p AND begins_with(sk, :a)", "ScanIndexForward": False},
        {
            "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
            "ProjectionExpression": "sk, #n",
            "FilterExpression": "#n > :ten",
            "ExpressionAttributeNames": {"#n": "n"},
        },
    ]
    left = [
        {"KeyConditionExpression": "#k = :p AND sk > :a", "ExpressionAttributeNames": {"#k": "pk"}},
        {"KeyConditionExpression": "pk = :p AND sk > :a", "ReturnConsumedCapacity": "TOTAL"},
        {"KeyConditionExpression": "pk=:p AND sk > :a"},
        {"KeyConditionExpression": "pk = :p AND sk > :a", "Select": "COUNT"},
        {"KeyConditionExpression": "pk = :p AND sk > :unused"},
        {"KeyConditionExpression": "pk = :p AND sk > :a", "ExclusiveStartKey": {"pk": {"S": "a"}}},
        {"KeyConditionExpression": "pk = :p AND data > :a"},
    ]
    for extra, fast in [(e, True) for e in handled] + [(e, False) for e in left]:
        request: dict[str, Any] = {"TableName": table, **extra}
        used = {p for p in values if p in str(extra)}
        request["ExpressionAttributeValues"] = {p: values[p] for p in used}
        if ":ten" in str(extra):
            request["ExpressionAttributeValues"][":ten"] = {"N": "10"}
        if ":unused" in str(extra):
            request["ExpressionAttributeValues"][":unused"] = {"S": "c#"}
            request["ExpressionAttributeValues"][":extra"] = {"S": "c#"}
        answered.clear()
        both = both_ways(lambda request=request: dynamodb.query(**request))
        assert both[0] == both[1], extra
        assert answered[:1] == [fast], extra


def test_a_query_s_body_is_byte_for_byte_moto_s(dynamodb: Any, table: str) -> None:
    """The raw body, not only what botocore makes of it: the same JSON, in the same order, as
    moto's Query answers through the serialiser patch."""
    request = {
        "TableName": table,
        "KeyConditionExpression": "pk = :p AND sk > :a",
        "ExpressionAttributeValues": {":p": {"S": "a"}, ":a": {"S": "c#0002"}},
        "Limit": 5,
    }
    bodies: list[bytes] = []

    def keep(http_response: Any, **_: Any) -> None:
        bodies.append(http_response.content)

    dynamodb.meta.events.register("after-call.dynamodb.Query", keep)
    try:
        dynamodb.query(**request)
        _item_requests.uninstall()  # moto's Query, with the other patches (its serialiser's)
        dynamodb.query(**request)
    finally:
        _item_requests.install()
        dynamodb.meta.events.unregister("after-call.dynamodb.Query", keep)
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert json.loads(bodies[0])["Count"] == 5
