"""The item requests the emulator answers without moto's web stack
(`infra.moto_patches._item_requests`) answer, and store, exactly what moto does: each request
below runs twice from the same items, once with every fast path and once with moto's own code
alone, and both the answers and the items afterwards must be equal. Each case also says whether
the fast layer must answer it or leave it to moto, so a case can not pass by never reaching the
code it is meant to test."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from emulator_support import in_process_dynamodb, use_fast_paths

from durable_streams_aws.core.storage.bootstrap import ensure_table
from durable_streams_aws.infra._in_process import wsgi_environ
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.moto_patches import _item_requests

STREAM = {"pk": {"S": "s#x"}, "sk": {"S": "m"}}
CHUNK = {"pk": {"S": "c#abc"}, "sk": {"S": "c#0000000000000200"}}
PRODUCER = {"pk": {"S": "s#x"}, "sk": {"S": "p#w"}}
MISSING = {"pk": {"S": "s#none"}, "sk": {"S": "m"}}
KEYS = (STREAM, CHUNK, PRODUCER, MISSING)

BASELINE = [
    {
        **STREAM,
        "tail": {"N": "100"},
        "acc": {"N": "1795657975.2656941"},
        "inc": {"S": "abc"},
        "closed": {"BOOL": False},
        "refs": {"N": "1"},
        "cb": {"M": {"id": {"S": "w"}, "ep": {"N": "0"}}},
        "inh": {"L": [{"M": {"inc": {"S": "old"}, "s": {"N": "0"}}}]},
        "blob": {"B": b"\x00\xff"},
    },
    {**PRODUCER, "inc": {"S": "abc"}, "ep": {"N": "0"}, "sq": {"N": "3"}},
]


@pytest.fixture(scope="module")
def dynamodb() -> Iterator[Any]:
    yield in_process_dynamodb()


@pytest.fixture(scope="module")
def table(dynamodb: Any) -> str:
    name = f"items-{uuid.uuid4().hex[:10]}"
    ensure_table(dynamodb, name)
    return name


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the fast layer answered each request that reached it (False: moto did)."""
    seen: list[bool] = []

    def recording(handler: Callable[..., bytes | None]) -> Callable[..., bytes | None]:
        def handle(*args: Any) -> bytes | None:
            answer = handler(*args)
            seen.append(answer is not None)
            return answer

        return handle

    for name, handler in list(_item_requests._HANDLERS.items()):
        monkeypatch.setitem(_item_requests._HANDLERS, name, recording(handler))
    return seen


def _reset(dynamodb: Any, table: str) -> None:
    use_fast_paths(False)
    try:
        for key in KEYS:
            dynamodb.delete_item(TableName=table, Key=key)
        for item in BASELINE:
            dynamodb.put_item(TableName=table, Item=item)
    finally:
        use_fast_paths(True)


def _items(dynamodb: Any, table: str) -> list[Any]:
    """The items under every key the cases touch, as moto's own GetItem answers them."""
    use_fast_paths(False)
    try:
        return [dynamodb.get_item(TableName=table, Key=key).get("Item") for key in KEYS]
    finally:
        use_fast_paths(True)


def _run(dynamodb: Any, table: str, request: Callable[[Any, str], Any], fast: bool) -> Any:
    _reset(dynamodb, table)
    use_fast_paths(fast)
    try:
        answer = request(dynamodb, table)
        answer.pop("ResponseMetadata", None)
    except Exception as error:
        answer = (type(error).__name__, str(error))
    finally:
        use_fast_paths(True)
    return answer, _items(dynamodb, table)


@dataclass(frozen=True)
class Case:
    name: str
    request: Callable[[Any, str], Any]
    fast: bool  # whether the fast layer answers it (else it must leave it to moto)


def _append(tail: int, old_tail: int, *extra: dict[str, Any]) -> Callable[[Any, str], Any]:
    """The store's append commit: the stream item's update and the chunk's put."""

    def request(client: Any, table: str) -> Any:
        update = {
            "TableName": table,
            "Key": STREAM,
            "UpdateExpression": "SET #tail = :tail, #acc = :acc",
            "ConditionExpression": "#inc = :inc AND #tail = :old_tail AND #closed = :false"
            " AND attribute_not_exists(#del) AND #acc <= :acc",
            "ExpressionAttributeNames": {
                "#tail": "tail",
                "#acc": "acc",
                "#inc": "inc",
                "#closed": "closed",
                "#del": "del",
            },
            "ExpressionAttributeValues": {
                ":tail": {"N": str(tail)},
                ":acc": {"N": "1795657976.5"},
                ":inc": {"S": "abc"},
                ":old_tail": {"N": str(old_tail)},
                ":false": {"BOOL": False},
            },
        }
        put = {
            "TableName": table,
            "Item": {**CHUNK, "st": {"N": "100"}, "d": {"B": b"x" * 100}},
        }
        return client.transact_write_items(
            TransactItems=[{"Update": update}, {"Put": put}, *extra],
            ClientRequestToken=uuid.uuid4().hex,
        )

    return request


def _producer_put(condition: str, values: dict[str, Any]) -> dict[str, Any]:
    return {
        "Put": {
            "Item": {**PRODUCER, "inc": {"S": "abc"}, "ep": {"N": "0"}, "sq": {"N": "4"}},
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#inc": "inc"}
            | ({"#sq": "sq"} if "#sq" in condition else {}),
            "ExpressionAttributeValues": values,
        }
    }


def _in_table(entry: dict[str, Any], table: str) -> dict[str, Any]:
    ((kind, request),) = entry.items()
    return {kind: {**request, "TableName": table}}


def _transaction(*entries: dict[str, Any]) -> Callable[[Any, str], Any]:
    return lambda client, table: client.transact_write_items(
        TransactItems=[_in_table(entry, table) for entry in entries]
    )


def _update_call(**request: Any) -> Callable[[Any, str], Any]:
    return lambda client, table: client.update_item(TableName=table, **{"Key": STREAM, **request})


def _put_call(item: dict[str, Any], **request: Any) -> Callable[[Any, str], Any]:
    return lambda client, table: client.put_item(TableName=table, Item=item, **request)


SET_TAIL = {"ExpressionAttributeNames": {"#t": "tail"}}
RESERVE = {
    "UpdateExpression": "SET #t = #t + :len, #r = #r + :one, #rt = :now",
    "ConditionExpression": "#inc = :inc AND #closed = :false",
    "ExpressionAttributeNames": {"#t": "tail", "#r": "refs", "#rt": "rt", "#inc": "inc"}
    | {"#closed": "closed"},
    "ExpressionAttributeValues": {
        ":len": {"N": "100"},
        ":one": {"N": "1"},
        ":now": {"N": "1795657999.25"},
        ":inc": {"S": "abc"},
        ":false": {"BOOL": False},
    },
}
CASES = [
    Case(
        "a reservation: counted up, the item answered",
        _update_call(**RESERVE, ReturnValues="ALL_NEW"),
        fast=True,
    ),
    Case("a counter counted up, nothing answered", _update_call(**RESERVE), fast=True),
    Case(
        "a counter that is not a number: moto's error",
        _update_call(
            **{
                **RESERVE,
                "ExpressionAttributeNames": {**RESERVE["ExpressionAttributeNames"], "#r": "inc"},
            },
        ),
        fast=False,
    ),
    Case(
        "a counter that is not there: moto's error",
        _update_call(
            **{
                **RESERVE,
                "ExpressionAttributeNames": {**RESERVE["ExpressionAttributeNames"], "#r": "none"},
            },
        ),
        fast=False,
    ),
    Case(
        "a counter added to another attribute goes to moto",
        _update_call(
            UpdateExpression="SET #t = #r + :one",
            ExpressionAttributeNames={"#t": "tail", "#r": "refs"},
            ExpressionAttributeValues={":one": {"N": "1"}},
        ),
        fast=False,
    ),
    Case(
        "a reservation refused, with the item as it was",
        _update_call(
            **{
                **RESERVE,
                "ExpressionAttributeValues": {
                    **RESERVE["ExpressionAttributeValues"],
                    ":false": {"BOOL": True},
                },
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
        fast=False,
    ),
    Case(
        "UPDATED_NEW goes to moto",
        _update_call(**RESERVE, ReturnValues="UPDATED_NEW"),
        fast=False,
    ),
    Case("append commit", _append(200, 100), fast=True),
    Case("append on a stale tail: cancelled", _append(200, 50), fast=False),
    Case(
        "a producer put refused: cancelled with moto's reasons",
        _transaction(
            _producer_put("attribute_not_exists(pk) OR #inc <> :inc", {":inc": {"S": "abc"}})
        ),
        fast=False,
    ),
    Case(
        "condition check and put",
        _transaction(
            {
                "ConditionCheck": {
                    "Key": STREAM,
                    "ConditionExpression": "attribute_exists(pk) AND size(#b) = :two",
                    "ExpressionAttributeNames": {"#b": "blob"},
                    "ExpressionAttributeValues": {":two": {"N": "2"}},
                }
            },
            {"Put": {"Item": {**CHUNK, "st": {"N": "0"}, "k": {"S": "data/abc/1"}}}},
        ),
        fast=True,
    ),
    Case(
        "a delete in the transaction goes to moto",
        _transaction({"Delete": {"Key": PRODUCER}}, {"Put": {"Item": {**CHUNK}}}),
        fast=False,
    ),
    Case(
        "one item twice in a transaction: moto's error",
        _transaction({"Put": {"Item": {**CHUNK}}}, {"Put": {"Item": {**CHUNK, "x": {"N": "1"}}}}),
        fast=False,
    ),
    Case(
        "an update of a missing item goes to moto (it creates it)",
        _transaction(
            {
                "Update": {
                    "Key": MISSING,
                    "UpdateExpression": "SET #t = :t",
                    **SET_TAIL,
                    "ExpressionAttributeValues": {":t": {"N": "1"}},
                }
            }
        ),
        fast=False,
    ),
    Case(
        "update with a condition",
        _update_call(
            UpdateExpression="SET #acc = :now",
            ConditionExpression="#inc = :inc AND #acc < :now",
            ExpressionAttributeNames={"#acc": "acc", "#inc": "inc"},
            ExpressionAttributeValues={":now": {"N": "1795657999"}, ":inc": {"S": "abc"}},
        ),
        fast=True,
    ),
    Case(
        "update refused by its condition: moto's error",
        _update_call(
            UpdateExpression="SET #acc = :now",
            ConditionExpression="#acc > :now",
            ExpressionAttributeNames={"#acc": "acc"},
            ExpressionAttributeValues={":now": {"N": "1795657999"}},
        ),
        fast=False,
    ),
    Case(
        "update of maps, lists, null and booleans, lower-case and spaced",
        _update_call(
            UpdateExpression="  set #cb=:cb ,  #l = :l,#n = :n, #c = :c ",
            ExpressionAttributeNames={"#cb": "cb", "#l": "expl", "#n": "gone", "#c": "closed"},
            ExpressionAttributeValues={
                ":cb": {"M": {"id": {"S": "v"}, "ep": {"N": "2"}, "sq": {"N": "-0.5"}}},
                ":l": {"L": [{"S": "a"}, {"S": ""}, {"M": {}}]},
                ":n": {"NULL": True},
                ":c": {"BOOL": True},
            },
            ReturnValues="NONE",
        ),
        fast=True,
    ),
    Case(
        "update asking for the new item",
        _update_call(
            UpdateExpression="SET #t = :t",
            **SET_TAIL,
            ExpressionAttributeValues={":t": {"N": "5"}},
            ReturnValues="ALL_NEW",
        ),
        fast=True,
    ),
    Case(
        "update asking for the old item goes to moto",
        _update_call(
            UpdateExpression="SET #t = :t",
            **SET_TAIL,
            ExpressionAttributeValues={":t": {"N": "5"}},
            ReturnValues="ALL_OLD",
        ),
        fast=False,
    ),
    Case(
        "a number counted up on its own",
        _update_call(
            UpdateExpression="SET #r = #r + :one",
            ExpressionAttributeNames={"#r": "refs"},
            ExpressionAttributeValues={":one": {"N": "1"}},
        ),
        fast=True,
    ),
    Case(
        "subtraction goes to moto",
        _update_call(
            UpdateExpression="SET #r = #r - :one",
            ExpressionAttributeNames={"#r": "refs"},
            ExpressionAttributeValues={":one": {"N": "1"}},
        ),
        fast=False,
    ),
    Case(
        "an unused value: moto's error",
        _update_call(
            UpdateExpression="SET #t = :t",
            **SET_TAIL,
            ExpressionAttributeValues={":t": {"N": "5"}, ":spare": {"N": "6"}},
        ),
        fast=False,
    ),
    Case(
        "an undefined name: moto's error",
        _update_call(
            UpdateExpression="SET #t = :t, #u = :t",
            **SET_TAIL,
            ExpressionAttributeValues={":t": {"N": "5"}},
        ),
        fast=False,
    ),
    Case(
        "a tab between clauses (moto's tokenizer refuses it): moto's error",
        lambda client, table: client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": STREAM,
                        "UpdateExpression": "SET #t = :t,\t#a = :a",
                        "ExpressionAttributeNames": {"#t": "tail", "#a": "acc"},
                        "ExpressionAttributeValues": {":t": {"N": "5"}, ":a": {"N": "6"}},
                    }
                }
            ]
        ),
        fast=False,
    ),
    Case(
        "a key attribute set: moto's error",
        _update_call(
            UpdateExpression="SET #k = :k",
            ExpressionAttributeNames={"#k": "sk"},
            ExpressionAttributeValues={":k": {"S": "other"}},
        ),
        fast=False,
    ),
    Case(
        "one attribute set twice: moto's error",
        _update_call(
            UpdateExpression="SET #t = :t, #u = :t",
            ExpressionAttributeNames={"#t": "tail", "#u": "tail"},
            ExpressionAttributeValues={":t": {"N": "5"}},
        ),
        fast=False,
    ),
    Case(
        "a condition moto cannot parse: moto's error",
        _update_call(
            UpdateExpression="SET #t = :t",
            ConditionExpression="#t >>= :t",
            **SET_TAIL,
            ExpressionAttributeValues={":t": {"N": "5"}},
        ),
        fast=False,
    ),
    Case(
        "an update growing the item past 400 KB: moto's error",
        _update_call(
            UpdateExpression="SET #a = :a, #b = :a",
            ExpressionAttributeNames={"#a": "big1", "#b": "big2"},
            ExpressionAttributeValues={":a": {"S": "y" * 210_000}},
        ),
        fast=False,
    ),
    Case(
        "put of binary, numbers, maps and lists",
        _put_call(
            {
                **CHUNK,
                "st": {"N": "1.50"},
                "d": {"B": b"\x00\x01binary"},
                "m": {"M": {"a": {"L": [{"N": "0"}, {"BOOL": False}, {"NULL": True}]}}},
                "e": {"S": ""},
            }
        ),
        fast=True,
    ),
    Case(
        "put of a nested binary value goes to moto",
        _put_call({**CHUNK, "m": {"M": {"b": {"B": b"q"}}}}),
        fast=False,
    ),
    Case("put of a set goes to moto", _put_call({**CHUNK, "s": {"SS": ["a"]}}), fast=False),
    Case(
        "put with a condition that holds",
        _put_call({**CHUNK}, ConditionExpression="attribute_not_exists(pk)"),
        fast=True,
    ),
    Case(
        "put refused by its condition: moto's error",
        _put_call({**STREAM}, ConditionExpression="attribute_not_exists(pk)"),
        fast=False,
    ),
    Case(
        "put of an empty key: moto's error",
        _put_call({"pk": {"S": ""}, "sk": {"S": "x"}}),
        fast=False,
    ),
    Case(
        "the sealer's conditional delete of a chunk",
        lambda client, table: client.delete_item(
            TableName=table,
            Key=PRODUCER,
            ConditionExpression="attribute_exists(pk) AND #st = :st AND attribute_not_exists(#pg)",
            ExpressionAttributeNames={"#st": "sq", "#pg": "pg"},
            ExpressionAttributeValues={":st": {"N": "3"}},
        ),
        fast=True,
    ),
    Case(
        "a delete refused by its condition: moto's error",
        lambda client, table: client.delete_item(
            TableName=table,
            Key=PRODUCER,
            ConditionExpression="#st = :st",
            ExpressionAttributeNames={"#st": "sq"},
            ExpressionAttributeValues={":st": {"N": "4"}},
        ),
        fast=False,
    ),
    Case(
        "a delete of no item",
        lambda client, table: client.delete_item(TableName=table, Key=MISSING),
        fast=True,
    ),
    Case(
        "a delete asking for the old item goes to moto",
        lambda client, table: client.delete_item(
            TableName=table, Key=STREAM, ReturnValues="ALL_OLD"
        ),
        fast=False,
    ),
    Case(
        "get of an item",
        lambda client, table: client.get_item(TableName=table, Key=STREAM, ConsistentRead=True),
        fast=True,
    ),
    Case(
        "get of no item",
        lambda client, table: client.get_item(TableName=table, Key=MISSING),
        fast=True,
    ),
    Case(
        "get with a projection goes to moto",
        lambda client, table: client.get_item(
            TableName=table, Key=STREAM, ProjectionExpression="tail"
        ),
        fast=False,
    ),
    Case(
        "get from no table: moto's error",
        lambda client, table: client.get_item(TableName="no-such-table", Key=STREAM),
        fast=False,
    ),
    Case(
        "batch get of found and missing items",
        lambda client, table: client.batch_get_item(
            RequestItems={table: {"Keys": [STREAM, MISSING, PRODUCER], "ConsistentRead": True}}
        ),
        fast=True,
    ),
    Case(
        "batch get of one key twice: moto's error",
        lambda client, table: client.batch_get_item(
            RequestItems={table: {"Keys": [STREAM, STREAM]}}
        ),
        fast=False,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_answers_and_items_are_moto_s(
    dynamodb: Any, table: str, answered: list[bool], case: Case
) -> None:
    fast = _run(dynamodb, table, case.request, fast=True)
    reached = list(answered)
    assert fast == _run(dynamodb, table, case.request, fast=False)
    assert reached, "the request never reached the fast layer"
    assert reached[-1] is case.fast


def test_the_producer_append_is_answered_fast(
    dynamodb: Any, table: str, answered: list[bool]
) -> None:
    """The store's append with an idempotent producer: stream update, chunk and producer."""
    producer = {
        "Put": {
            "TableName": table,
            "Item": {**PRODUCER, "inc": {"S": "abc"}, "ep": {"N": "0"}, "sq": {"N": "4"}},
            "ConditionExpression": "#inc = :inc AND #ep = :ep AND #sq = :sq",
            "ExpressionAttributeNames": {"#inc": "inc", "#ep": "ep", "#sq": "sq"},
            "ExpressionAttributeValues": {
                ":inc": {"S": "abc"},
                ":ep": {"N": "0"},
                ":sq": {"N": "3"},
            },
        }
    }
    request = _append(200, 100, producer)
    fast = _run(dynamodb, table, request, fast=True)
    assert answered and answered[-1] is True
    assert fast == _run(dynamodb, table, request, fast=False)
    assert fast[1][2]["sq"] == {"N": "4"}


CONDITION_NAMES = {"#t": "tail", "#i": "inc", "#c": "closed", "#d": "del", "#m": "cb"}
CONDITION_VALUES = {
    ":n": {"N": "100"},
    ":small": {"N": "99.5"},
    ":s": {"S": "abc"},
    ":false": {"BOOL": False},
    ":null": {"NULL": True},
    ":map": {"M": {"id": {"S": "w"}, "ep": {"N": "0"}}},
}
# (expression, whether the fast builder makes it rather than moto's parser)
CONDITIONS = [
    ("#t = :n", True),
    ("#t <> :n", True),
    ("#t > :small AND #t >= :n AND #t < :n", True),
    ("#t <= :n OR #i = :s", True),
    (":n = #t", True),
    ("#i < :s", True),
    ("#i >= :s", True),
    ("#c = :false AND attribute_not_exists(#d) AND attribute_exists(pk)", True),
    ("attribute_not_exists(pk) OR #i <> :s", True),
    ("NOT #t = :n", True),
    ("not (#t = :n or #i = :s) and attribute_exists(sk)", True),
    ("((#t = :n))", False),  # moto refuses redundant parentheses
    ("#t = :s", True),  # a number compared with a string
    ("#t < :s", True),  # ordered across types: moto raises, and must raise both ways
    ("#d = :null", True),
    ("#m = :map", True),
    ("#t = #t", True),
    ("tail = :n", True),  # a plain name that is not reserved
    ("size(#i) = :n", False),
    ("#t BETWEEN :small AND :n", False),
    ("#t IN (:n, :small)", False),
    ("begins_with(#i, :s)", False),
    ("#m.id = :s", False),
    ("name = :s", False),  # a reserved word: moto's error
    ("#t = :n AND", False),
    (":n = :n", False),
    ("attribute_exists(:n)", False),
]


@pytest.mark.parametrize(("expression", "built"), CONDITIONS, ids=[c for c, _ in CONDITIONS])
@pytest.mark.parametrize("stored", [BASELINE[0], None], ids=["item", "no item"])
def test_conditions_are_evaluated_as_moto_s(
    expression: str, built: bool, stored: dict[str, Any] | None
) -> None:
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    from durable_streams_aws.infra.moto_patches import _condition_builder

    item = None
    if stored is not None:
        item = Item(DynamoType(stored["pk"]), DynamoType(stored["sk"]), dict(stored))

    def outcome(make: Callable[[], Any]) -> Any:
        try:
            return make().expr(item)
        except Exception as error:
            return type(error).__name__

    fast = _condition_builder.build(expression, CONDITION_NAMES, CONDITION_VALUES)
    assert (fast is not None) is built
    if fast is not None:
        moto_s = outcome(
            lambda: get_filter_expression(expression, CONDITION_NAMES, CONDITION_VALUES)
        )
        assert outcome(lambda: fast) == moto_s
        assert repr(fast) == repr(
            get_filter_expression(expression, CONDITION_NAMES, CONDITION_VALUES)
        )


def _raw_body(dynamodb: Any, table: str, request: Callable[[Any, str], Any]) -> bytes:
    """The response body exactly as the emulator sent it."""
    bodies: list[bytes] = []

    def keep(http_response: Any, **_: Any) -> None:
        bodies.append(http_response.content)

    _reset(dynamodb, table)
    dynamodb.meta.events.register("after-call", keep)
    try:
        with contextlib.suppress(Exception):
            request(dynamodb, table)
    finally:
        dynamodb.meta.events.unregister("after-call", keep)
    return bodies[-1]


@pytest.mark.parametrize(
    "case", [case for case in CASES if case.fast], ids=[c.name for c in CASES if c.fast]
)
def test_bodies_are_byte_for_byte_moto_s(dynamodb: Any, table: str, case: Case) -> None:
    """With every other fast path on, the layer's body is the one moto would have sent."""
    fast = _raw_body(dynamodb, table, case.request)
    _item_requests.uninstall()
    try:
        moto_s = _raw_body(dynamodb, table, case.request)
    finally:
        _item_requests.install()
    assert fast == moto_s


def test_a_body_of_unknown_length_is_left_to_moto(
    dynamodb: Any, table: str, answered: list[bool]
) -> None:
    """A chunked request to the listening emulator has no Content-Length: the layer must not
    take its body to be empty."""
    item = {"pk": {"S": "chunked"}, "sk": {"S": "one"}, "n": {"N": "1"}}
    body = json.dumps({"TableName": table, "Item": item}).encode()
    environ = wsgi_environ(
        {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/",
            "HTTP_HOST": "127.0.0.1:9",
            "HTTP_X_AMZ_TARGET": "DynamoDB_20120810.PutItem",
            "CONTENT_TYPE": "application/x-amz-json-1.0",
            "HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=emulator/20260101/us-east-1/"
            "dynamodb/aws4_request, SignedHeaders=host, Signature=0",
        },
        body,
    )
    del environ["CONTENT_LENGTH"]
    environ["wsgi.input_terminated"] = True
    statuses: list[str] = []
    layer = _item_requests.FastItemRequests(Emulator().app.app.app)
    b"".join(layer(environ, lambda status, headers, *_: statuses.append(status)))
    assert statuses == ["200 OK"]
    assert answered == []  # never parsed by the layer
    key = {"pk": item["pk"], "sk": item["sk"]}
    assert dynamodb.get_item(TableName=table, Key=key)["Item"] == item
