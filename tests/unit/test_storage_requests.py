"""The store's DynamoDB requests (`core.storage._requests`), exactly: the emulator's fast path
answers only the forms written here (`tests/integration/test_store_fast_paths.py`), so a
changed expression is a change to review, not a detail."""

from __future__ import annotations

from dataclasses import replace

from durable_streams_aws.core.storage import StreamInfo
from durable_streams_aws.core.storage import _requests as requests

TABLE = "streams"
STREAM_KEY = {"pk": {"S": "s#a/b"}, "sk": {"S": "meta"}}
INFO = StreamInfo(
    path="a/b",
    incarnation="inc-1",
    content_type="text/plain",
    tail=10,
    closed=False,
    closed_by=None,
    last_stream_seq=None,
    ttl_seconds=None,
    expires_at=None,
    last_access=900.0,
    created_at=800.0,
)
WITH_TTL = replace(INFO, ttl_seconds=60, renew_window=6.0)


def test_a_listing_page_filters_stream_items_by_prefix() -> None:
    assert requests.list_page(TABLE, "a/", 50, None) == {
        "TableName": TABLE,
        "Limit": 50,
        "FilterExpression": "begins_with(pk, :prefix) AND sk = :meta",
        "ExpressionAttributeValues": {":prefix": {"S": "s#a/"}, ":meta": {"S": "meta"}},
    }
    start = {"pk": {"S": "s#a/x"}, "sk": {"S": "meta"}}
    assert requests.list_page(TABLE, "", 5, start)["ExclusiveStartKey"] == start


def test_reads_of_the_stream_item_are_consistent() -> None:
    assert requests.get_stream(TABLE, "a/b") == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "ConsistentRead": True,
    }
    producer = {"pk": {"S": "s#a/b"}, "sk": {"S": "p#w"}}
    assert requests.get_stream_and_producers(TABLE, "a/b", ["w"]) == {
        "RequestItems": {TABLE: {"Keys": [STREAM_KEY, producer], "ConsistentRead": True}}
    }
    assert requests.get_stream_and_producers(TABLE, "a/b", []) == {
        "RequestItems": {TABLE: {"Keys": [STREAM_KEY], "ConsistentRead": True}}
    }


def test_a_create_puts_the_item_only_where_none_is() -> None:
    action = requests.create_stream(TABLE, INFO)
    assert action.keys() == {"Put"}
    put = action["Put"]
    assert put["ConditionExpression"] == "attribute_not_exists(pk)"
    assert put["TableName"] == TABLE
    assert put["Item"]["pk"] == STREAM_KEY["pk"]
    assert put["Item"]["inc"] == {"S": "inc-1"}


def test_a_fork_references_a_source_without_expiry() -> None:
    assert requests.reference_source(TABLE, INFO, 7, 1000.5) == {
        "Update": {
            "TableName": TABLE,
            "Key": STREAM_KEY,
            "UpdateExpression": "SET #refs = #refs + :one",
            "ConditionExpression": "#inc = :inc AND attribute_not_exists(#del)"
            " AND (#tail >= :position OR #rsv >= :position)",
            "ExpressionAttributeNames": {
                "#inc": "inc",
                "#del": "del",
                "#tail": "tail",
                "#rsv": "rsv",
                "#refs": "refs",
            },
            "ExpressionAttributeValues": {
                ":inc": {"S": "inc-1"},
                ":one": {"N": "1"},
                ":position": {"N": "7"},
            },
        }
    }


def test_a_fork_references_a_source_that_expires_only_while_it_lives() -> None:
    source = replace(WITH_TTL, expires_at=5000.0)
    update = requests.reference_source(TABLE, source, 0, 1000.0)["Update"]
    assert update["ConditionExpression"] == (
        "#inc = :inc AND attribute_not_exists(#del)"
        " AND (#tail >= :position OR #rsv >= :position) AND #exp > :now AND #acc > :dead"
    )
    assert update["ExpressionAttributeNames"] == {
        "#inc": "inc",
        "#del": "del",
        "#tail": "tail",
        "#rsv": "rsv",
        "#refs": "refs",
        "#exp": "exp",
        "#acc": "acc",
    }
    assert update["ExpressionAttributeValues"] == {
        ":inc": {"S": "inc-1"},
        ":one": {"N": "1"},
        ":position": {"N": "0"},
        ":now": {"N": "1000.0"},
        ":dead": {"N": "934.0"},
    }


def test_a_renewal_never_resurrects_nor_moves_back() -> None:
    assert requests.renew_access(TABLE, WITH_TTL, 1000.25, 934.0) == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "UpdateExpression": "SET #acc = :now",
        "ConditionExpression": "#inc = :inc AND #acc > :dead AND #acc < :now",
        "ExpressionAttributeNames": {"#acc": "acc", "#inc": "inc"},
        "ExpressionAttributeValues": {
            ":now": {"N": "1000.25"},
            ":dead": {"N": "934.0"},
            ":inc": {"S": "inc-1"},
        },
    }


def test_a_soft_delete_needs_a_fork_and_happens_once() -> None:
    assert requests.soft_delete(TABLE, INFO) == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "UpdateExpression": "SET #del = :true",
        "ConditionExpression": "#inc = :inc AND #refs > :zero AND attribute_not_exists(#del)",
        "ExpressionAttributeNames": {"#del": "del", "#inc": "inc", "#refs": "refs"},
        "ExpressionAttributeValues": {
            ":true": {"BOOL": True},
            ":inc": {"S": "inc-1"},
            ":zero": {"N": "0"},
        },
    }


def test_a_hard_delete_needs_no_fork() -> None:
    assert requests.delete_stream(TABLE, INFO) == {
        "Delete": {
            "TableName": TABLE,
            "Key": STREAM_KEY,
            "ConditionExpression": "#inc = :inc AND #refs = :zero",
            "ExpressionAttributeNames": {"#inc": "inc", "#refs": "refs"},
            "ExpressionAttributeValues": {":inc": {"S": "inc-1"}, ":zero": {"N": "0"}},
        }
    }


def test_a_retired_incarnation_is_marked_in_its_shard() -> None:
    assert requests.retire_incarnation(TABLE, INFO, 1000.5) == {
        "Put": {
            "TableName": TABLE,
            "Item": {
                "pk": {"S": "gc#13"},
                "sk": {"S": "inc-1"},
                "path": {"S": "a/b"},
                "at": {"N": "1000.5"},
            },
        }
    }


def test_a_released_source_counts_one_fork_fewer() -> None:
    assert requests.release_source(TABLE, "a/b", "inc-0") == {
        "Update": {
            "TableName": TABLE,
            "Key": STREAM_KEY,
            "UpdateExpression": "SET #refs = #refs - :one",
            "ConditionExpression": "#inc = :inc AND #refs > :zero",
            "ExpressionAttributeNames": {"#refs": "refs", "#inc": "inc"},
            "ExpressionAttributeValues": {
                ":one": {"N": "1"},
                ":zero": {"N": "0"},
                ":inc": {"S": "inc-0"},
            },
        }
    }
