"""The store's DynamoDB requests (`core.storage._requests`), exactly: the emulator's fast path
answers only the forms written here (`tests/integration/test_store_fast_paths.py`), so a
changed expression is a change to review, not a detail."""

from __future__ import annotations

from dataclasses import replace

from durable_streams_aws.core.protocol.headers import ProducerClaim
from durable_streams_aws.core.protocol.producer import ProducerState
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
            " AND (#tail >= :position OR #rsv >= :position)"
            " AND (attribute_not_exists(#rf) OR #rf <= :position)"
            " AND (attribute_not_exists(#cutrf) OR #cutrf <= :position)",
            "ExpressionAttributeNames": {
                "#inc": "inc",
                "#del": "del",
                "#tail": "tail",
                "#rsv": "rsv",
                "#refs": "refs",
                "#rf": "rf",
                "#cutrf": "cutrf",
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
        " AND (#tail >= :position OR #rsv >= :position)"
        " AND (attribute_not_exists(#rf) OR #rf <= :position)"
        " AND (attribute_not_exists(#cutrf) OR #cutrf <= :position)"
        " AND #exp > :now AND #acc > :dead"
    )
    assert update["ExpressionAttributeNames"] == {
        "#inc": "inc",
        "#del": "del",
        "#tail": "tail",
        "#rsv": "rsv",
        "#refs": "refs",
        "#rf": "rf",
        "#cutrf": "cutrf",
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


# ---------------------------------------------------------------------- appends

COMMIT_NAMES = {
    "#tail": "tail",
    "#rsv": "rsv",
    "#rn": "rn",
    "#tn": "tn",
    "#acc": "acc",
    "#inc": "inc",
    "#closed": "closed",
    "#del": "del",
}


def test_a_direct_commit_moves_the_stream_from_exactly_the_state_decided_on() -> None:
    before = replace(INFO, ranges=2)
    after = replace(before, tail=15, ranges=3, last_access=901.5)
    assert requests.direct_commit(TABLE, before, after, holding=False) == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "UpdateExpression": "SET #tail = :tail, #rsv = :tail, #rn = :rn, #tn = :rn, #acc = :acc",
        "ConditionExpression": "#inc = :inc AND #tail = :old_tail AND #closed = :false"
        " AND attribute_not_exists(#del) AND #acc <= :acc AND #rsv = :old_tail AND #rn = :old_rn",
        "ExpressionAttributeNames": COMMIT_NAMES,
        "ExpressionAttributeValues": {
            ":tail": {"N": "15"},
            ":rn": {"N": "3"},
            ":acc": {"N": "901.5"},
            ":inc": {"S": "inc-1"},
            ":old_tail": {"N": "10"},
            ":false": {"BOOL": False},
            ":old_rn": {"N": "2"},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def test_a_closing_commit_of_an_expiring_uncounted_stream_that_lifts_a_hold() -> None:
    closer = ProducerClaim("w", 1, 4)
    before = replace(WITH_TTL, expires_at=5000.0, counted=False, last_stream_seq="1")
    after = replace(before, tail=12, ranges=1, last_access=1000.0, closed=True)
    after = replace(after, closed_by=closer, last_stream_seq="2")
    update = requests.direct_commit(TABLE, before, after, holding=True)
    assert update["UpdateExpression"] == (
        "SET #tail = :tail, #rsv = :tail, #rn = :rn, #tn = :rn, #acc = :acc,"
        " #closed = :true, #cb = :cb, #sseq = :sseq, #hold = :unheld"
    )
    assert update["ConditionExpression"] == (
        "#inc = :inc AND #tail = :old_tail AND #closed = :false AND attribute_not_exists(#del)"
        " AND #acc <= :acc AND attribute_not_exists(#rn) AND #exp > :now AND #acc > :dead"
    )
    assert update["ExpressionAttributeNames"] == {
        **COMMIT_NAMES,
        "#cb": "cb",
        "#sseq": "sseq",
        "#exp": "exp",
        "#hold": "hold",
    }
    assert update["ExpressionAttributeValues"] == {
        ":tail": {"N": "12"},
        ":rn": {"N": "1"},
        ":acc": {"N": "1000.0"},
        ":inc": {"S": "inc-1"},
        ":old_tail": {"N": "10"},
        ":false": {"BOOL": False},
        ":true": {"BOOL": True},
        ":cb": {"M": {"id": {"S": "w"}, "ep": {"N": "1"}, "sq": {"N": "4"}}},
        ":sseq": {"S": "2"},
        ":now": {"N": "1000.0"},
        ":dead": {"N": "934.0"},
        ":unheld": {"N": "0"},
    }


PRODUCER_ITEM = {
    "pk": {"S": "s#a/b"},
    "sk": {"S": "p#w"},
    "inc": {"S": "inc-1"},
    "ep": {"N": "1"},
    "sq": {"N": "4"},
    "pe": {"N": "20"},
}


def test_a_producer_s_first_commit_finds_no_state_of_this_incarnation() -> None:
    put = requests.producer_commit(TABLE, INFO, "w", None, ProducerState(1, 4), 20)
    assert put == {
        "TableName": TABLE,
        "Item": PRODUCER_ITEM,
        "ExpressionAttributeNames": {"#inc": "inc"},
        "ConditionExpression": "attribute_not_exists(pk) OR #inc <> :inc",
        "ExpressionAttributeValues": {":inc": {"S": "inc-1"}},
    }


def test_a_producer_s_commit_finds_the_state_decided_on() -> None:
    put = requests.producer_commit(TABLE, INFO, "w", ProducerState(1, 3), ProducerState(1, 4), 20)
    assert put == {
        "TableName": TABLE,
        "Item": PRODUCER_ITEM,
        "ExpressionAttributeNames": {"#inc": "inc", "#ep": "ep", "#sq": "sq"},
        "ConditionExpression": "#inc = :inc AND #ep = :ep AND #sq = :sq",
        "ExpressionAttributeValues": {
            ":inc": {"S": "inc-1"},
            ":ep": {"N": "1"},
            ":sq": {"N": "3"},
        },
    }


RESERVE_NAMES = {
    "#rsv": "rsv",
    "#rn": "rn",
    "#rt": "rt",
    "#inc": "inc",
    "#closed": "closed",
    "#del": "del",
    "#hold": "hold",
}
RESERVE_CONDITION = (
    "#inc = :inc AND #closed = :false AND attribute_not_exists(#del)"
    " AND attribute_exists(#rsv) AND (attribute_not_exists(#hold) OR #hold < :now)"
)


def test_a_reservation_counts_up_on_what_rarely_changes() -> None:
    assert requests.reserve_range(TABLE, INFO, 7, 1000.5) == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "UpdateExpression": "SET #rsv = #rsv + :length, #rn = #rn + :one, #rt = :now",
        "ConditionExpression": RESERVE_CONDITION,
        "ExpressionAttributeNames": RESERVE_NAMES,
        "ExpressionAttributeValues": {
            ":length": {"N": "7"},
            ":one": {"N": "1"},
            ":now": {"N": "1000.5"},
            ":inc": {"S": "inc-1"},
            ":false": {"BOOL": False},
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def test_a_reservation_renews_a_sliding_ttl_and_respects_an_expiry() -> None:
    info = replace(WITH_TTL, expires_at=5000.0, last_access=1001.0)
    update = requests.reserve_range(TABLE, info, 7, 1000.0)
    assert update["UpdateExpression"] == (
        "SET #rsv = #rsv + :length, #rn = #rn + :one, #rt = :now, #acc = :acc"
    )
    assert update["ConditionExpression"] == (
        RESERVE_CONDITION + " AND #exp > :now AND #acc <= :acc AND #acc > :dead"
    )
    assert update["ExpressionAttributeNames"] == {**RESERVE_NAMES, "#exp": "exp", "#acc": "acc"}
    assert update["ExpressionAttributeValues"] == {
        ":length": {"N": "7"},
        ":one": {"N": "1"},
        ":now": {"N": "1000.0"},
        ":inc": {"S": "inc-1"},
        ":false": {"BOOL": False},
        ":acc": {"N": "1001.0"},  # never moved back
        ":dead": {"N": "935.0"},
    }


def test_a_fill_s_producer_state_follows_its_predecessor_at_or_below_its_range() -> None:
    put = requests.producer_fill(TABLE, INFO, ProducerClaim("w", 1, 4), 15, 20)
    assert put == {
        "TableName": TABLE,
        "Item": PRODUCER_ITEM,
        "ConditionExpression": "#inc = :inc AND #ep = :ep AND #sq = :prev"
        " AND (attribute_not_exists(#pe) OR #pe <= :start)",
        "ExpressionAttributeNames": {"#inc": "inc", "#ep": "ep", "#pe": "pe", "#sq": "sq"},
        "ExpressionAttributeValues": {
            ":inc": {"S": "inc-1"},
            ":ep": {"N": "1"},
            ":start": {"N": "15"},
            ":prev": {"N": "3"},
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def test_a_fill_of_a_new_epoch_follows_an_older_epoch_or_incarnation_or_none() -> None:
    put = requests.producer_fill(TABLE, INFO, ProducerClaim("w", 2, 0), 15, 20)
    assert put["ConditionExpression"] == (
        "attribute_not_exists(pk) OR #inc < :inc"
        " OR (#inc = :inc AND #ep < :ep AND (attribute_not_exists(#pe) OR #pe <= :start))"
    )
    assert put["ExpressionAttributeNames"] == {"#inc": "inc", "#ep": "ep", "#pe": "pe"}
    assert put["ExpressionAttributeValues"] == {
        ":inc": {"S": "inc-1"},
        ":ep": {"N": "2"},
        ":start": {"N": "15"},
    }


HOLD_NAMES = {"#hold": "hold", "#inc": "inc", "#closed": "closed", "#del": "del"}


def test_a_hold_is_placed_where_none_is_in_force() -> None:
    assert requests.hold_reservations(TABLE, INFO, 1000.0, 1010.0, None) == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "UpdateExpression": "SET #hold = :until",
        "ConditionExpression": "#inc = :inc AND #closed = :false AND attribute_not_exists(#del)"
        " AND (attribute_not_exists(#hold) OR #hold < :now)",
        "ExpressionAttributeNames": HOLD_NAMES,
        "ExpressionAttributeValues": {
            ":until": {"N": "1010.0"},
            ":now": {"N": "1000.0"},
            ":inc": {"S": "inc-1"},
            ":false": {"BOOL": False},
        },
    }


def test_a_hold_is_renewed_by_its_holder() -> None:
    hold = requests.hold_reservations(TABLE, INFO, 1000.0, 1010.0, 1005.0)
    assert hold["ConditionExpression"] == (
        "#inc = :inc AND #closed = :false AND attribute_not_exists(#del)"
        " AND (attribute_not_exists(#hold) OR #hold < :now OR #hold = :mine)"
    )
    assert hold["ExpressionAttributeValues"][":mine"] == {"N": "1005.0"}


def test_a_hold_is_lifted_only_by_its_holder() -> None:
    assert requests.release_hold(TABLE, INFO, 1010.0) == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "UpdateExpression": "REMOVE #hold",
        "ConditionExpression": "#hold = :until",
        "ExpressionAttributeNames": {"#hold": "hold"},
        "ExpressionAttributeValues": {":until": {"N": "1010.0"}},
    }


# ---------------------------------------------------------------------- settling ranges

CLAIM_KEY = {"pk": {"S": "k#inc-1"}, "sk": {"S": "0000000000000004"}}


def test_a_fill_claims_its_range_unless_it_was_claimed() -> None:
    assert requests.fill_claim(TABLE, "inc-1", 4, 1000.5) == {
        "Put": {
            "TableName": TABLE,
            "Item": {**CLAIM_KEY, "at": {"N": "1000.5"}, "v": {"BOOL": False}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def test_a_reader_voids_a_range_unless_it_was_filled() -> None:
    assert requests.void_claim(TABLE, "inc-1", 4, 1000.5) == {
        "Put": {
            "TableName": TABLE,
            "Item": {**CLAIM_KEY, "at": {"N": "1000.5"}, "v": {"BOOL": True}},
            "ConditionExpression": "attribute_not_exists(pk) OR #v = :true",
            "ExpressionAttributeNames": {"#v": "v"},
            "ExpressionAttributeValues": {":true": {"BOOL": True}},
        }
    }


def test_a_writer_voids_its_own_range_only_if_it_is_unclaimed() -> None:
    assert requests.own_void_claim(TABLE, "inc-1", 4, 1000.5) == {
        "Put": {
            "TableName": TABLE,
            "Item": {**CLAIM_KEY, "at": {"N": "1000.5"}, "v": {"BOOL": True}},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def test_a_void_chunk_may_only_be_laid_again_the_same() -> None:
    assert requests.void_chunk(TABLE, "inc-1", 10, 30, (3, 5)) == {
        "Put": {
            "TableName": TABLE,
            "Item": {
                "pk": {"S": "d#inc-1"},
                "sk": {"S": "c#0000000000000030"},
                "st": {"N": "10"},
                "n": {"N": "5"},
                "n0": {"N": "3"},
                "v": {"BOOL": True},
            },
            "ConditionExpression": "attribute_not_exists(pk) OR (#v = :true AND #st = :st)",
            "ExpressionAttributeNames": {"#v": "v", "#st": "st"},
            "ExpressionAttributeValues": {":true": {"BOOL": True}, ":st": {"N": "10"}},
        }
    }


def test_a_void_checks_its_gap_is_still_pending() -> None:
    assert requests.still_pending(TABLE, INFO, 10) == {
        "ConditionCheck": {
            "TableName": TABLE,
            "Key": STREAM_KEY,
            "ConditionExpression": "#inc = :inc AND #tail <= :start",
            "ExpressionAttributeNames": {"#inc": "inc", "#tail": "tail"},
            "ExpressionAttributeValues": {":inc": {"S": "inc-1"}, ":start": {"N": "10"}},
        }
    }


def test_settling_looks_at_the_chunks_between_the_published_and_the_reserved_end() -> None:
    pending = replace(INFO, published=10, reserved=25)
    assert requests.placed_above_tail(TABLE, pending) == {
        "TableName": TABLE,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
        "ExpressionAttributeValues": {
            ":pk": {"S": "d#inc-1"},
            ":first": {"S": "c#0000000000000011"},
            ":last": {"S": "c#0000000000000025"},
        },
        "ProjectionExpression": "sk, st, n, n0, v",
        "ConsistentRead": True,
    }
    assert requests.get_range_claim(TABLE, "inc-1", 4) == {
        "TableName": TABLE,
        "Key": CLAIM_KEY,
        "ConsistentRead": True,
    }


def test_publishing_moves_the_tail_only_forward() -> None:
    assert requests.publish_tail(TABLE, INFO, 25, 6) == {
        "TableName": TABLE,
        "Key": STREAM_KEY,
        "UpdateExpression": "SET #tail = :tail, #tn = :tn",
        "ConditionExpression": "#inc = :inc AND #tail < :tail",
        "ExpressionAttributeNames": {"#tail": "tail", "#tn": "tn", "#inc": "inc"},
        "ExpressionAttributeValues": {
            ":tail": {"N": "25"},
            ":tn": {"N": "6"},
            ":inc": {"S": "inc-1"},
        },
    }
