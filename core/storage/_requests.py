"""The DynamoDB requests of the stream store, as plain data: those of its flows
(`core.storage.dynamo`: create, fork, renew, delete, list), of its append path
(`core.storage._append`) and of settling reserved ranges (`core.storage._settle`).

Each function takes plain values and answers one request (keyword arguments of a client
call) or one transaction action: no client, no clock, no I/O, so the exact expressions are
unit-tested (`tests/unit/test_storage_requests.py`).

These forms are also a contract with the embedded emulator's fast path
(`infra.moto_patches`: `_item_requests`, `_condition_builder`, `_query`), which
answers only: transactions of Put, Update and ConditionCheck; updates of the form
`SET #a = :v, #b = #b + :v`; conditions comparing attributes with values, `attribute_exists`
and `attribute_not_exists`, joined by AND, OR, NOT and parentheses; every placeholder
defined is used; Queries of one partition by its sort key. Anything else is still answered,
by moto's slow path; `tests/integration/test_store_fast_paths.py` runs the store's flows and
fails when a request drops to it. Left to moto on purpose (rare): `delete_stream`,
`release_source` and `release_hold`; `list_page` is a Scan, which has no fast path.
"""

from __future__ import annotations

from typing import Any

from ..protocol.headers import ProducerClaim
from ..protocol.producer import ProducerState
from . import _items as items
from .model import StreamInfo

Request = dict[str, Any]


def list_page(table: str, prefix: str, page_items: int, start: Request | None) -> Request:
    """One scan page of stream items whose paths start with `prefix` (from `start`, a last
    evaluated key, when given)."""
    request: Request = {
        "TableName": table,
        "Limit": page_items,
        "FilterExpression": "begins_with(pk, :prefix) AND sk = :meta",
        "ExpressionAttributeValues": {
            ":prefix": items.s(items.STREAM_PREFIX + prefix),
            ":meta": items.s(items.META),
        },
    }
    if start is not None:
        request["ExclusiveStartKey"] = start
    return request


def producers_of(table: str, path: str) -> Request:
    """The producer items of a stream's partition (every incarnation's: the caller keeps the
    current one's)."""
    return {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :producers)",
        "ExpressionAttributeValues": {
            ":pk": items.s(items.STREAM_PREFIX + path),
            ":producers": items.s(items.PRODUCER_SORT_PREFIX),
        },
        "ConsistentRead": True,
    }


def forks_of(table: str, source: str) -> Request:
    """A scan for the stream items whose fork source is `source`."""
    return {
        "TableName": table,
        "FilterExpression": "sk = :meta AND src = :source",
        "ExpressionAttributeValues": {":meta": items.s(items.META), ":source": items.s(source)},
    }


def get_stream(table: str, path: str) -> Request:
    """A consistent read of the stream item."""
    return {"TableName": table, "Key": items.stream_key(path), "ConsistentRead": True}


def get_stream_and_producers(table: str, path: str, producer_ids: list[str]) -> Request:
    """One consistent batch read of the stream item and these producers' items."""
    keys = [items.stream_key(path), *(items.producer_key(path, p) for p in producer_ids)]
    return {"RequestItems": {table: {"Keys": keys, "ConsistentRead": True}}}


def create_stream(table: str, info: StreamInfo) -> Request:
    """A transaction action: the new stream item, if the path holds none."""
    return {
        "Put": {
            "TableName": table,
            "Item": items.encode_stream(info),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def reference_source(table: str, source: StreamInfo, position: int, now: float) -> Request:
    """A transaction action counting one more fork on `source`, if it is still live as read:
    the same incarnation, not deleted, not expired, and holding `position`."""
    values: dict[str, Any] = {
        ":inc": items.s(source.incarnation),
        ":one": items.n(1),
        ":position": items.n(position),
    }
    # At or below the readable tail, which the published tail may not have reached yet, and
    # at or above where its retained data starts, or will once a cut announced takes effect
    # (a retention run drops what is below only once no fork reads it).
    condition = (
        "#inc = :inc AND attribute_not_exists(#del) AND (#tail >= :position OR #rsv >= :position)"
        " AND (attribute_not_exists(#rf) OR #rf <= :position)"
        " AND (attribute_not_exists(#cutrf) OR #cutrf <= :position)"
    )
    if source.expires_at is not None:
        # Only then: DynamoDB refuses a request with a value its expressions do not use.
        condition += " AND #exp > :now"
        values[":now"] = items.n(now)
    dead = source.oldest_live_access(now)
    if dead is not None:
        condition += " AND #acc > :dead"
        values[":dead"] = items.n(dead)
    names = {
        "#inc": "inc",
        "#del": "del",
        "#tail": "tail",
        "#rsv": "rsv",
        "#refs": "refs",
        "#rf": "rf",
        "#cutrf": "cutrf",
    }
    if source.expires_at is not None:
        names["#exp"] = "exp"
    if source.ttl_seconds is not None:
        names["#acc"] = "acc"
    return {
        "Update": {
            "TableName": table,
            "Key": items.stream_key(source.path),
            "UpdateExpression": "SET #refs = #refs + :one",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def renew_access(table: str, info: StreamInfo, now: float, dead: float) -> Request:
    """An UpdateItem moving the stream's access time to `now`: never for an expired stream
    (accessed at or before `dead`), never backwards."""
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "SET #acc = :now",
        "ConditionExpression": "#inc = :inc AND #acc > :dead AND #acc < :now",
        "ExpressionAttributeNames": {"#acc": "acc", "#inc": "inc"},
        "ExpressionAttributeValues": {
            ":now": items.n(now),
            ":dead": items.n(dead),
            ":inc": items.s(info.incarnation),
        },
    }


def soft_delete(table: str, info: StreamInfo) -> Request:
    """An UpdateItem marking a stream that forks still read as deleted."""
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "SET #del = :true",
        "ConditionExpression": "#inc = :inc AND #refs > :zero AND attribute_not_exists(#del)",
        "ExpressionAttributeNames": {"#del": "del", "#inc": "inc", "#refs": "refs"},
        "ExpressionAttributeValues": {
            ":true": {"BOOL": True},
            ":inc": items.s(info.incarnation),
            ":zero": items.n(0),
        },
    }


def delete_stream(table: str, info: StreamInfo) -> Request:
    """A transaction action removing the stream item of an incarnation nothing forks."""
    return {
        "Delete": {
            "TableName": table,
            "Key": items.stream_key(info.path),
            "ConditionExpression": "#inc = :inc AND #refs = :zero",
            "ExpressionAttributeNames": {"#inc": "inc", "#refs": "refs"},
            "ExpressionAttributeValues": {
                ":inc": items.s(info.incarnation),
                ":zero": items.n(0),
            },
        }
    }


def retire_incarnation(table: str, info: StreamInfo, now: float) -> Request:
    """A transaction action marking the incarnation's data for the collector."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **items.retire_key(info.incarnation),
                "path": items.s(info.path),
                "at": items.n(now),
            },
        }
    }


def release_source(table: str, source_path: str, source_incarnation: str) -> Request:
    """A transaction action counting one fork fewer on the source incarnation.

    Not a form the emulator's fast path answers (it adds, never subtracts): deletes of forks
    are rare, and moto answers this one itself."""
    return {
        "Update": {
            "TableName": table,
            "Key": items.stream_key(source_path),
            "UpdateExpression": "SET #refs = #refs - :one",
            "ConditionExpression": "#inc = :inc AND #refs > :zero",
            "ExpressionAttributeNames": {"#refs": "refs", "#inc": "inc"},
            "ExpressionAttributeValues": {
                ":one": items.n(1),
                ":zero": items.n(0),
                ":inc": items.s(source_incarnation),
            },
        }
    }


# ---------------------------------------------------------------------- appends

# The stream is this incarnation, open, and not deleted.
_OPEN = "#inc = :inc AND #closed = :false AND attribute_not_exists(#del)"


def direct_commit(table: str, before: StreamInfo, after: StreamInfo, holding: bool) -> Request:
    """The stream item's update of a direct commit (`core.storage._append`), taking it from
    `before`, exactly as decided on, to `after`; `holding`: the commit lifts a hold on
    reservations. Sent alone as an UpdateItem, or as a transaction's Update."""
    sets = [
        "#tail = :tail",
        "#rsv = :tail",
        "#rn = :rn",
        "#tn = :rn",
        "#acc = :acc",
    ]
    values: dict[str, Any] = {
        ":tail": items.n(after.tail),
        ":rn": items.n(after.ranges),
        ":acc": items.n(after.last_access),
        ":inc": items.s(before.incarnation),
        ":old_tail": items.n(before.tail),
        ":false": {"BOOL": False},
    }
    names = {
        "#tail": "tail",
        "#rsv": "rsv",
        "#rn": "rn",
        "#tn": "tn",
        "#acc": "acc",
        "#inc": "inc",
        "#closed": "closed",
        "#del": "del",
    }
    if after.closed and not before.closed:
        sets.append("#closed = :true")
        values[":true"] = {"BOOL": True}
        if after.closed_by is not None:
            sets.append("#cb = :cb")
            names["#cb"] = "cb"
            values[":cb"] = items.encode_claim(after.closed_by)
    if after.last_stream_seq != before.last_stream_seq and after.last_stream_seq is not None:
        sets.append("#sseq = :sseq")
        names["#sseq"] = "sseq"
        values[":sseq"] = items.s(after.last_stream_seq)
    # Exactly the state decided on: this tail, nothing reserved above it, these ranges.
    # The access time only moves forward: a renewal that landed after our read must not
    # be undone (that could expire the stream before its last read plus the TTL).
    condition = (
        "#inc = :inc AND #tail = :old_tail AND #closed = :false AND attribute_not_exists(#del)"
        " AND #acc <= :acc"
    )
    if before.counted:
        condition += " AND #rsv = :old_tail AND #rn = :old_rn"
        values[":old_rn"] = items.n(before.ranges)
    else:  # an item written before ranges were counted: counted from now on
        condition += " AND attribute_not_exists(#rn)"
    # Not expired (the decision may rest on a remembered, not a fresh, snapshot).
    if before.expires_at is not None:
        condition += " AND #exp > :now"
        names["#exp"] = "exp"
        values[":now"] = items.n(after.last_access)
    dead = before.oldest_live_access(after.last_access)
    if dead is not None:
        condition += " AND #acc > :dead"
        values[":dead"] = items.n(dead)
    if holding:  # ranges may be reserved again after this commit
        sets.append("#hold = :unheld")
        names["#hold"] = "hold"
        values[":unheld"] = items.n(0)
    return {
        "TableName": table,
        "Key": items.stream_key(before.path),
        "UpdateExpression": "SET " + ", ".join(sets),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def producer_item(info: StreamInfo, producer_id: str, state: ProducerState, end: int) -> Request:
    """A producer's item: its state, valid for this incarnation, and where its data ends."""
    return {
        **items.producer_key(info.path, producer_id),
        "inc": items.s(info.incarnation),
        "ep": items.n(state.epoch),
        "sq": items.n(state.last_seq),
        "pe": items.n(end),  # where its last accepted data ends
    }


def producer_commit(
    table: str,
    info: StreamInfo,
    producer_id: str,
    before: ProducerState | None,
    after: ProducerState,
    end: int,
) -> Request:
    """A direct commit's Put of a producer's new state, conditioned on the state decided on
    (`before`; None: absent, or left over from an earlier incarnation of the path)."""
    put: Request = {
        "TableName": table,
        "Item": producer_item(info, producer_id, after, end),
        "ExpressionAttributeNames": {"#inc": "inc"},
    }
    if before is None:
        put["ConditionExpression"] = "attribute_not_exists(pk) OR #inc <> :inc"
        put["ExpressionAttributeValues"] = {":inc": items.s(info.incarnation)}
    else:
        put["ConditionExpression"] = "#inc = :inc AND #ep = :ep AND #sq = :sq"
        put["ExpressionAttributeNames"].update({"#ep": "ep", "#sq": "sq"})
        put["ExpressionAttributeValues"] = {
            ":inc": items.s(info.incarnation),
            ":ep": items.n(before.epoch),
            ":sq": items.n(before.last_seq),
        }
    return put


def reserve_range(table: str, info: StreamInfo, length: int, now: float) -> Request:
    """An UpdateItem reserving `length` bytes: the reserved end and the range count counted
    up, answering the stream as it is just after (as it was, when refused). Conditioned only
    on what rarely changes (incarnation, not closed, deleted, held off or expired), so
    writers never race for it; a sliding TTL is renewed by it."""
    # When the last range was reserved, for readers judging how old pending ranges are.
    # Not a condition: writers would race for it. A request retried seconds late may set
    # it back; readers may then void a fresh range early, whose writer reserves anew.
    sets = ["#rsv = #rsv + :length", "#rn = #rn + :one", "#rt = :now"]
    names = {
        "#rsv": "rsv",
        "#rn": "rn",
        "#rt": "rt",
        "#inc": "inc",
        "#closed": "closed",
        "#del": "del",
    }
    values: dict[str, Any] = {
        ":length": items.n(length),
        ":one": items.n(1),
        ":now": items.n(now),
        ":inc": items.s(info.incarnation),
        ":false": {"BOOL": False},
    }
    condition = (
        _OPEN + " AND attribute_exists(#rsv) AND (attribute_not_exists(#hold) OR #hold < :now)"
    )
    names["#hold"] = "hold"
    if info.expires_at is not None:
        condition += " AND #exp > :now"
        names["#exp"] = "exp"
    if info.ttl_seconds is not None:
        # A sliding TTL: the append renews it (the access time never moves back).
        access = max(now, info.last_access)
        sets.append("#acc = :acc")
        names["#acc"] = "acc"
        values[":acc"] = items.n(access)
        condition += " AND #acc <= :acc"
        dead = info.oldest_live_access(access)
        if dead is not None:
            condition += " AND #acc > :dead"
            values[":dead"] = items.n(dead)
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "SET " + ", ".join(sets),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def producer_fill(
    table: str, info: StreamInfo, claim: ProducerClaim, start: int, end: int
) -> Request:
    """A reserved range's Put of the producer's new state, conditioned on what accepting the
    request requires: its predecessor (seq - 1 of this epoch; for seq 0, an older epoch or
    none) stored, and at or below this range, so its data keeps the order of its seqs."""
    after = ProducerState(claim.epoch, claim.seq)
    names = {"#inc": "inc", "#ep": "ep", "#pe": "pe"}
    values: dict[str, Any] = {
        ":inc": items.s(info.incarnation),
        ":ep": items.n(claim.epoch),
        ":start": items.n(start),
    }
    ordered = "(attribute_not_exists(#pe) OR #pe <= :start)"
    if claim.seq == 0:
        # An older incarnation's state is as good as none; a newer one's (the stream was
        # re-created while this fill was on its way) refuses it. Incarnation ids begin
        # with their creation time, so they sort in the order they were made.
        condition = (
            f"attribute_not_exists(pk) OR #inc < :inc OR (#inc = :inc AND #ep < :ep AND {ordered})"
        )
    else:
        names["#sq"] = "sq"
        values[":prev"] = items.n(claim.seq - 1)
        condition = f"#inc = :inc AND #ep = :ep AND #sq = :prev AND {ordered}"
    return {
        "TableName": table,
        "Item": producer_item(info, claim.producer_id, after, end),
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def hold_reservations(
    table: str, info: StreamInfo, now: float, until: float, mine: float | None
) -> Request:
    """An UpdateItem holding new reservations off until `until`: placed where no hold is in
    force, or renewing this append's own (`mine`, the time it ends)."""
    values: dict[str, Any] = {
        ":until": items.n(until),
        ":now": items.n(now),
        ":inc": items.s(info.incarnation),
        ":false": {"BOOL": False},
    }
    condition = _OPEN + " AND (attribute_not_exists(#hold) OR #hold < :now"
    if mine is not None:
        condition += " OR #hold = :mine"
        values[":mine"] = items.n(mine)
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "SET #hold = :until",
        "ConditionExpression": condition + ")",
        "ExpressionAttributeNames": {
            "#hold": "hold",
            "#inc": "inc",
            "#closed": "closed",
            "#del": "del",
        },
        "ExpressionAttributeValues": values,
    }


def release_hold(table: str, info: StreamInfo, until: float) -> Request:
    """An UpdateItem lifting a hold, if it is still the one that ends at `until`.

    Not a form the emulator's fast path answers (it sets, never removes): only an append
    that placed a hold and is then refused sends it, and moto answers it itself."""
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "REMOVE #hold",
        "ConditionExpression": "#hold = :until",
        "ExpressionAttributeNames": {"#hold": "hold"},
        "ExpressionAttributeValues": {":until": items.n(until)},
    }


# ---------------------------------------------------------------------- settling ranges


def _claim(table: str, incarnation: str, number: int, now: float, void: bool) -> Request:
    return {
        "TableName": table,
        "Item": {
            **items.range_claim_key(incarnation, number),
            "at": items.n(now),
            "v": {"BOOL": void},
        },
    }


def fill_claim(table: str, incarnation: str, number: int, now: float) -> Request:
    """A transaction action claiming range `number` filled: it fails if the range was
    claimed (voided) first."""
    put = _claim(table, incarnation, number, now, void=False)
    put["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": put}


def void_claim(table: str, incarnation: str, number: int, now: float) -> Request:
    """A transaction action claiming range `number` void: it also succeeds if the range was
    voided already, and fails if it was filled."""
    put = _claim(table, incarnation, number, now, void=True)
    put["ConditionExpression"] = "attribute_not_exists(pk) OR #v = :true"
    put["ExpressionAttributeNames"] = {"#v": "v"}
    put["ExpressionAttributeValues"] = {":true": {"BOOL": True}}
    return {"Put": put}


def own_void_claim(table: str, incarnation: str, number: int, now: float) -> Request:
    """A transaction action by which a writer gives up the range it reserved: claimed void
    only if nobody claimed it (a fill of its own whose answer was lost may have)."""
    put = _claim(table, incarnation, number, now, void=True)
    put["ConditionExpression"] = "attribute_not_exists(pk)"
    return {"Put": put}


def void_chunk(
    table: str, incarnation: str, start: int, end: int, numbers: tuple[int, int]
) -> Request:
    """A transaction action laying the void chunk over [start, end): it stands for ranges
    (numbered from the first to the last of `numbers`) that hold nothing, ever. It may be
    laid again, the same, by another reader voiding the same gap."""
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **items.chunk_key(incarnation, end),
                "st": items.n(start),
                "n": items.n(numbers[1]),
                "n0": items.n(numbers[0]),
                "v": {"BOOL": True},
            },
            "ConditionExpression": "attribute_not_exists(pk) OR (#v = :true AND #st = :st)",
            "ExpressionAttributeNames": {"#v": "v", "#st": "st"},
            "ExpressionAttributeValues": {":true": {"BOOL": True}, ":st": items.n(start)},
        }
    }


def still_pending(table: str, info: StreamInfo, start: int) -> Request:
    """A transaction action checking that the published tail is still at or below `start`."""
    return {
        "ConditionCheck": {
            "TableName": table,
            "Key": items.stream_key(info.path),
            "ConditionExpression": "#inc = :inc AND #tail <= :start",
            "ExpressionAttributeNames": {"#inc": "inc", "#tail": "tail"},
            "ExpressionAttributeValues": {
                ":inc": items.s(info.incarnation),
                ":start": items.n(start),
            },
        }
    }


def placed_above_tail(table: str, info: StreamInfo) -> Request:
    """A Query of the chunk items ending above the published tail, up to the reserved end
    (their positions, numbers and voidness only)."""
    return {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :first AND :last",
        "ExpressionAttributeValues": {
            ":pk": items.s(items.chunk_partition(info.incarnation)),
            ":first": items.s(items.chunk_sort_key(info.published_tail + 1)),
            ":last": items.s(items.chunk_sort_key(info.reserved_end)),
        },
        "ProjectionExpression": "sk, st, n, n0, v",
        "ConsistentRead": True,
    }


def get_range_claim(table: str, incarnation: str, number: int) -> Request:
    """A consistent read of range `number`'s claim."""
    return {
        "TableName": table,
        "Key": items.range_claim_key(incarnation, number),
        "ConsistentRead": True,
    }


def publish_tail(table: str, info: StreamInfo, readable: int, number: int) -> Request:
    """An UpdateItem moving the published tail (and its range count) forward, never back."""
    return {
        "TableName": table,
        "Key": items.stream_key(info.path),
        "UpdateExpression": "SET #tail = :tail, #tn = :tn",
        "ConditionExpression": "#inc = :inc AND #tail < :tail",
        "ExpressionAttributeNames": {"#tail": "tail", "#tn": "tn", "#inc": "inc"},
        "ExpressionAttributeValues": {
            ":tail": items.n(readable),
            ":tn": items.n(number),
            ":inc": items.s(info.incarnation),
        },
    }
