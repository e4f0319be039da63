"""The store's common DynamoDB item requests, answered without moto's web stack, for the
embedded emulator.

An append is one TransactWriteItems; moto spends about 2 ms on it here: Flask and moto's
dispatch, its request parsing, then its update-expression parser, validator and executor for a
plain `SET #a = :a, #b = :b`. This layer sits in front of moto's WSGI app, under the emulator's
lock, and answers the narrow forms the store sends on its request path and the sealer's
(TransactWriteItems of Put, Update and ConditionCheck; UpdateItem; PutItem; DeleteItem;
GetItem; BatchGetItem; Query of one partition) straight from moto's tables, with moto's own
condition evaluation and item types. A Query's page is `_query.page`, moto's rules; its items
are encoded from moto's values directly, where moto converts each one twice (to plain values,
binary decoded, then to JSON, binary encoded again).

It only ever answers success. Each request is checked whole first, changing nothing: its shape,
its keys, its values, its expressions (every placeholder defined and used, updates only
`SET #name = :value`) and every condition. Anything outside those forms, and every request a
condition refuses, goes to moto untouched, so every error (a cancelled transaction with its
reasons, a validation message) is moto's own, and what is answered here is what moto answers.
`tests/integration/test_emulator_item_requests.py` runs requests both ways and compares the
answers, raw and parsed, and the stored items.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moto.core import responses
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.limits import HASH_KEY_MAX_LENGTH, RANGE_KEY_MAX_LENGTH
from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item, bytesize
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import dynamo_to_dict
from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords
from moto.dynamodb.responses import DynamoHandler, ProjectionExpressionParser

from .._dynamodb_json import CONTENT_TYPE, encode
from . import _condition_builder, _query

_TARGET_PREFIX = "DynamoDB_20120810."
# moto refuses an item over this size (its own limit, a little above DynamoDB's 400 KB).
_ITEM_BYTES_LIMIT = 405_000
_MAX_TRANSACTION_ITEMS = 100
_MAX_BATCH_KEYS = 100
_NUMBER = re.compile(r"-?(0|[1-9][0-9]{0,37})(\.[0-9]{1,38})?")
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
# moto's tokenizer takes spaces and line feeds between tokens, nothing else (no tabs).
_SET_CLAUSE = re.compile(r"[ \n]*(#[A-Za-z0-9_]+)[ \n]*=[ \n]*(:[A-Za-z0-9_]+)[ \n]*")
# `#a = #a + :v`: a number attribute counted up (a reservation's counters).
_ADD_CLAUSE = re.compile(
    r"[ \n]*(#[A-Za-z0-9_]+)[ \n]*=[ \n]*(#[A-Za-z0-9_]+)[ \n]*\+[ \n]*(:[A-Za-z0-9_]+)[ \n]*"
)
_SET_KEYWORD = re.compile(r"[ \n]*SET[ \n]+", re.IGNORECASE)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Handler = Callable[[DynamoDBBackend, dict[str, Any]], bytes | None]
# Told of each request of an operation handled here that was left to moto: the operation, the
# request body, and the status line moto answered with.
Observer = Callable[[str, bytes, str], None]

_enabled = False
_observer: Observer | None = None


def install() -> None:
    global _enabled
    _enabled = True


def uninstall() -> None:
    global _enabled
    _enabled = False


def observe(observer: Observer | None) -> None:
    """Tell `observer` of every request of the operations handled here that moto answered
    (None: no one). A success among them is a request of a form this layer does not know:
    `tests/integration/test_store_fast_paths.py` finds the store's with it."""
    global _observer
    _observer = observer


class FastItemRequests:
    """WSGI middleware in front of moto's app: answers what it can, passes on the rest."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        handler = _HANDLERS.get(target.removeprefix(_TARGET_PREFIX)) if _enabled else None
        length = environ.get("CONTENT_LENGTH")
        if handler is None or not target.startswith(_TARGET_PREFIX) or not length:
            return self.app(environ, start_response)  # (a body of unknown length: moto's)
        body = environ["wsgi.input"].read(int(length))
        environ["wsgi.input"] = io.BytesIO(body)  # moto reads it again if it answers
        answer = _answer(handler, environ, body)
        if answer is None:
            return self._to_moto(environ, start_response, target, body)
        start_response(
            "200 OK",
            [
                ("Content-Type", CONTENT_TYPE),
                ("x-amzn-requestid", responses.gen_amzn_requestid_long()),
                ("x-amz-crc32", str(zlib.crc32(answer))),
                ("Content-Length", str(len(answer))),
            ],
        )
        return [answer]

    def _to_moto(
        self, environ: dict[str, Any], start_response: Callable[..., Any], target: str, body: bytes
    ) -> Any:
        observer = _observer
        if observer is None:
            return self.app(environ, start_response)
        operation = target.removeprefix(_TARGET_PREFIX)

        def noted(status: str, *rest: Any) -> Any:
            observer(operation, body, status)
            return start_response(status, *rest)

        return self.app(environ, noted)


def _answer(handler: Handler, environ: dict[str, Any], body: bytes) -> bytes | None:
    if environ.get("HTTP_CONTENT_ENCODING") or environ.get("HTTP_X_MOTO_ACCOUNT_ID"):
        return None
    if "MOTO_ACCOUNT_ID" in os.environ:
        return None
    try:
        params = json.loads(body)
    except ValueError:
        return None
    backend = _backend(environ)
    if backend is None or not isinstance(params, dict):
        return None
    return handler(backend, params)


def _backend(environ: dict[str, Any]) -> DynamoDBBackend | None:
    """The backend moto would serve this request from (its account and region rules)."""
    from moto.iam.models import get_account_id_from

    authorization = environ.get("HTTP_AUTHORIZATION", "")
    if "AWS4" not in authorization:
        return None
    url = environ.get("HTTP_HOST", "") + environ.get("PATH_INFO", "")
    by_url = DynamoHandler.region_regex.search(url)
    by_agent = DynamoHandler.region_from_useragent_regex.search(environ.get("HTTP_USER_AGENT", ""))
    if by_url:
        region = by_url.group(1)
    elif by_agent:
        region = by_agent.group(1)
    else:
        region = authorization.split(",")[0].split("/")[2]
    access_key = DynamoHandler.access_key_regex.search(authorization)
    account = get_account_id_from(access_key.group(1) if access_key else "AKIAEXAMPLE")
    return dynamodb_backends[account][region]


# ---------------------------------------------------------------------- checks


def _allowed(request: dict[str, Any], keys: frozenset[str]) -> bool:
    return request.keys() <= keys


def _table(backend: DynamoDBBackend, name: Any) -> Table | None:
    """A table of the one shape handled here: string hash and range keys, no indexes, no
    stream."""
    table = backend.tables.get(name) if isinstance(name, str) else None
    if (
        table is None
        or table.range_key_attr is None
        or table.hash_key_type != "S"
        or table.range_key_type != "S"
        or table.global_indexes
        or table.indexes
        or table.stream_shard is not None
    ):
        return None
    return table


@dataclass(frozen=True)
class _Key:
    hash: DynamoType
    range: DynamoType

    @property
    def identity(self) -> tuple[str, str]:
        return self.hash.value, self.range.value


def _key(table: Table, attributes: Any) -> _Key | None:
    """The item key in `attributes` (a Key, or an Item's key attributes)."""
    if not isinstance(attributes, dict):
        return None
    values = []
    for name, limit in (
        (table.hash_key_attr, HASH_KEY_MAX_LENGTH),
        (table.range_key_attr, RANGE_KEY_MAX_LENGTH),
    ):
        value = attributes.get(name)
        if not isinstance(value, dict) or value.keys() != {"S"}:
            return None
        text = value["S"]
        if not isinstance(text, str) or not text or bytesize(text) > limit:
            return None
        values.append(DynamoType({"S": text}))
    return _Key(*values)


def _exact_key(table: Table, attributes: Any) -> _Key | None:
    if not isinstance(attributes, dict) or len(attributes) != 2:
        return None
    return _key(table, attributes)


def _plain(value: Any, binary: bool) -> bool:
    """Whether `value` is an attribute value moto stores exactly as sent: a string, a
    number, a boolean, null, or a map or list of those; binary only at the top (moto keeps
    nested binary values base64-encoded, and that quirk is left to moto)."""
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((kind, inner),) = value.items()
    if kind == "S":
        return isinstance(inner, str)
    if kind == "N":
        return isinstance(inner, str) and _NUMBER.fullmatch(inner) is not None
    if kind == "BOOL":
        return isinstance(inner, bool)
    if kind == "NULL":
        return inner is True
    if kind == "B":
        return binary and isinstance(inner, str) and _base64(inner) is not None
    if kind == "M":
        return isinstance(inner, dict) and all(
            isinstance(name, str) and name and _plain(member, False)
            for name, member in inner.items()
        )
    if kind == "L":
        return isinstance(inner, list) and all(_plain(member, False) for member in inner)
    return False


def _base64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _stored(value: dict[str, Any]) -> DynamoType:
    """The value as moto keeps it (its request parser decodes top-level binary values)."""
    if "B" in value:
        return DynamoType({"B": _base64(value["B"])})
    return DynamoType(value)


@dataclass(frozen=True)
class _Expressions:
    """A request's condition, with its names and values, checked for use: every placeholder
    in the expressions is defined, and every one defined is used."""

    condition: str | None
    names: dict[str, str]
    values: dict[str, Any]


def _expressions(request: dict[str, Any], *texts: str) -> _Expressions | None:
    condition = request.get("ConditionExpression")
    names = request.get("ExpressionAttributeNames", {})
    values = request.get("ExpressionAttributeValues", {})
    if condition is not None and (not isinstance(condition, str) or not condition.strip()):
        return None
    if not isinstance(names, dict) or not isinstance(values, dict):
        return None
    if ("ExpressionAttributeNames" in request and not names) or (
        "ExpressionAttributeValues" in request and not values
    ):
        return None
    if not all(isinstance(name, str) and name for name in names.values()):
        return None
    if not all(_plain(value, binary=False) for value in values.values()):
        return None
    used = {found for text in (*texts, condition or "") for found in _PLACEHOLDER.findall(text)}
    if used != names.keys() | values.keys():
        return None
    return _Expressions(condition, names, values)


def _holds(expressions: _Expressions, item: Item | None) -> bool | None:
    """Whether the condition holds for `item`; None when moto should judge the request (its
    parser refused the expression)."""
    if expressions.condition is None:
        return True
    condition, names, values = expressions.condition, expressions.names, expressions.values
    try:
        check = _condition_builder.build(condition, names, values)
        if check is None:
            check = get_filter_expression(condition, names, values)
        return bool(check.expr(item))
    except Exception:
        return None


# ---------------------------------------------------------------------- writes


@dataclass
class _Write:
    """One checked write: `apply` cannot fail."""

    table: Table
    key: _Key
    item: Item | None = None  # a Put's new item
    updates: dict[str, DynamoType] | None = None  # an Update's new attribute values

    def apply(self) -> None:
        if self.item is not None:
            self.table.items[self.key.hash][self.key.range] = self.item
            return
        assert self.updates is not None
        current = self.table.items[self.key.hash][self.key.range]
        for name, value in self.updates.items():
            # Sizes were checked against moto's limit before anything was written.
            dict.__setitem__(current.attrs, name, value)


_WRITE_FIELDS = frozenset(
    {
        "TableName",
        "ConditionExpression",
        "ExpressionAttributeNames",
        "ExpressionAttributeValues",
        # What a refused condition answers with: refusals are moto's to answer anyway.
        "ReturnValuesOnConditionCheckFailure",
    }
)
_PUT_FIELDS = _WRITE_FIELDS | {"Item"}
_UPDATE_FIELDS = _WRITE_FIELDS | {"Key", "UpdateExpression"}
_KEYED_FIELDS = _WRITE_FIELDS | {"Key"}


def _current(table: Table, key: _Key) -> Item | None:
    return table.items.get(key.hash, {}).get(key.range)


def _put(backend: DynamoDBBackend, request: Any) -> tuple[_Write, bool | None] | None:
    """A checked Put, and whether its condition holds (None: moto judges it)."""
    if not isinstance(request, dict) or not _allowed(request, _PUT_FIELDS):
        return None
    table = _table(backend, request.get("TableName"))
    attributes = request.get("Item")
    if table is None or not isinstance(attributes, dict):
        return None
    key = _key(table, attributes)
    expressions = _expressions(request)
    if key is None or expressions is None:
        return None
    if not all(isinstance(name, str) and name for name in attributes):
        return None
    if not all(_plain(value, binary=True) for value in attributes.values()):
        return None
    stored = {name: _stored(value) for name, value in attributes.items()}
    size = sum(bytesize(name) + value.size() for name, value in stored.items())
    if size > _ITEM_BYTES_LIMIT:
        return None
    item = Item(key.hash, key.range, {})
    for name, value in stored.items():
        dict.__setitem__(item.attrs, name, value)
    return _Write(table, key, item=item), _holds(expressions, _current(table, key))


def _set_clauses(expression: Any) -> list[tuple[str, str, bool]] | None:
    """The (name placeholder, value placeholder, counted up) triples of
    `SET #a = :a, #b = #b + :b, ...`."""
    if not isinstance(expression, str):
        return None
    keyword = _SET_KEYWORD.match(expression)
    if keyword is None:
        return None
    clauses = []
    for part in expression[keyword.end() :].split(","):
        clause = _SET_CLAUSE.fullmatch(part)
        if clause is not None:
            clauses.append((clause.group(1), clause.group(2), False))
            continue
        added = _ADD_CLAUSE.fullmatch(part)
        if added is None or added.group(1) != added.group(2):
            return None
        clauses.append((added.group(1), added.group(3), True))
    return clauses


def _update(backend: DynamoDBBackend, request: Any) -> tuple[_Write, bool | None] | None:
    """A checked Update of an item that exists, and whether its condition holds."""
    if not isinstance(request, dict) or not _allowed(request, _UPDATE_FIELDS):
        return None
    table = _table(backend, request.get("TableName"))
    if table is None:
        return None
    key = _exact_key(table, request.get("Key"))
    clauses = _set_clauses(request.get("UpdateExpression"))
    if key is None or clauses is None:
        return None
    expressions = _expressions(request, request["UpdateExpression"])
    current = _current(table, key)
    if expressions is None or current is None:
        return None
    updates: dict[str, DynamoType] = {}
    for name_placeholder, value_placeholder, counted in clauses:
        name = expressions.names[name_placeholder]
        if name in updates or name in (table.hash_key_attr, table.range_key_attr):
            return None  # overlapping paths, or a key attribute: moto's errors
        value = DynamoType(expressions.values[value_placeholder])
        if counted:
            present = current.attrs.get(name)
            if present is None or present.type != "N" or value.type != "N":
                return None  # moto's error (or its own arithmetic): moto answers
            value = present + value  # moto's own arithmetic on numbers
        updates[name] = value
    # A bound on every size moto's item checks while it sets the values one by one.
    added = sum(bytesize(name) + value.size() for name, value in updates.items())
    if current.size() + added > _ITEM_BYTES_LIMIT:
        return None
    return _Write(table, key, updates=updates), _holds(expressions, current)


def _keyed(backend: DynamoDBBackend, request: Any) -> tuple[Table, _Key, bool | None] | None:
    """A checked request on one item by its key alone (a ConditionCheck, a DeleteItem): its
    table, its key, and whether its condition holds."""
    if not isinstance(request, dict) or not _allowed(request, _KEYED_FIELDS):
        return None
    table = _table(backend, request.get("TableName"))
    key = _exact_key(table, request.get("Key")) if table is not None else None
    expressions = _expressions(request)
    if table is None or key is None or expressions is None:
        return None
    return table, key, _holds(expressions, _current(table, key))


# ---------------------------------------------------------------------- operations


def _json(result: dict[str, Any]) -> bytes:
    """The body moto's fast serializer sends for `result` (moto's item types included)."""
    return encode(dynamo_to_dict(result)).encode()


_TRANSACTION_ANSWER = json.dumps({"ConsumedCapacity": [], "ItemCollectionMetrics": {}}).encode()


def transact_write_items(backend: DynamoDBBackend, params: dict[str, Any]) -> bytes | None:
    if not _allowed(params, frozenset({"TransactItems", "ClientRequestToken"})):
        return None
    if not isinstance(params.get("ClientRequestToken", ""), str):
        return None
    entries = params.get("TransactItems")
    if not isinstance(entries, list) or not 1 <= len(entries) <= _MAX_TRANSACTION_ITEMS:
        return None
    writes: list[_Write] = []
    seen: set[tuple[str, tuple[str, str]]] = set()
    for entry in entries:
        if not isinstance(entry, dict) or len(entry) != 1:
            return None
        ((kind, request),) = entry.items()
        if kind == "ConditionCheck":
            checked = _keyed(backend, request)
            if checked is None or "ConditionExpression" not in request:
                return None
            table, key, holds = checked
        elif kind in ("Put", "Update"):
            planned = (_put if kind == "Put" else _update)(backend, request)
            if planned is None:
                return None
            write, holds = planned
            key, table = write.key, write.table
            writes.append(write)
        else:
            return None
        if not holds:  # refused, or for moto to judge: moto answers with the reasons
            return None
        identity = (table.name, key.identity)
        if identity in seen:
            return None
        seen.add(identity)
    for write in writes:
        write.apply()
    return _TRANSACTION_ANSWER


Planner = Callable[[DynamoDBBackend, Any], tuple[_Write, bool | None] | None]


def _single_write(
    plan: Planner,
    backend: DynamoDBBackend,
    params: dict[str, Any],
    answer: Callable[[_Write], bytes],
    returns: frozenset[str] = frozenset({"NONE"}),
) -> bytes | None:
    """A PutItem or UpdateItem: planned, applied if its condition holds, answered."""
    if params.get("ReturnValues", "NONE") not in returns:
        return None
    planned = plan(backend, {name: v for name, v in params.items() if name != "ReturnValues"})
    if planned is None or not planned[1]:
        return None
    write = planned[0]
    write.apply()
    return answer(write)


def update_item(backend: DynamoDBBackend, params: dict[str, Any]) -> bytes | None:
    all_new = params.get("ReturnValues") == "ALL_NEW"

    def answer(write: _Write) -> bytes:
        consumed = {"ConsumedCapacity": {"TableName": write.table.name, "CapacityUnits": 0.5}}
        if not all_new:
            return _json(consumed)
        # As moto answers: the item as it now is, then the capacity.
        item = write.table.items[write.key.hash][write.key.range]
        return _json({**item.to_json(), **consumed})

    return _single_write(_update, backend, params, answer, returns=frozenset({"NONE", "ALL_NEW"}))


def put_item(backend: DynamoDBBackend, params: dict[str, Any]) -> bytes | None:
    return _single_write(_put, backend, params, lambda _: b"{}")


def delete_item(backend: DynamoDBBackend, params: dict[str, Any]) -> bytes | None:
    if params.get("ReturnValues", "NONE") != "NONE":
        return None
    checked = _keyed(backend, {name: v for name, v in params.items() if name != "ReturnValues"})
    if checked is None or not checked[2]:
        return None
    table, key, _ = checked
    table.delete_item(key.hash, key.range)
    return _json({"ConsumedCapacityUnits": 0.5})


def _read_fields_ok(request: dict[str, Any], fields: frozenset[str]) -> bool:
    return _allowed(request, fields) and isinstance(request.get("ConsistentRead", False), bool)


def get_item(backend: DynamoDBBackend, params: dict[str, Any]) -> bytes | None:
    if not _read_fields_ok(params, frozenset({"TableName", "Key", "ConsistentRead"})):
        return None
    table = _table(backend, params.get("TableName"))
    key = _exact_key(table, params.get("Key")) if table is not None else None
    if table is None or key is None:
        return None
    item = _current(table, key)
    if item is None:
        return b"{}"
    return _json({"Item": item.describe_attrs(attributes=None)["Item"]})


# moto answers a batch at most this large; a larger one goes to moto for its unprocessed keys.
_BATCH_BYTES = 16 * 1024 * 1024


def batch_get_item(backend: DynamoDBBackend, params: dict[str, Any]) -> bytes | None:
    if not _allowed(params, frozenset({"RequestItems"})):
        return None
    batches = params.get("RequestItems")
    if not isinstance(batches, dict) or not batches:
        return None
    found: dict[str, list[Item]] = {}
    counts: dict[str, int] = {}
    size = 0
    for name, batch in batches.items():
        table = _table(backend, name)
        if table is None or not isinstance(batch, dict):
            return None
        if not _read_fields_ok(batch, frozenset({"Keys", "ConsistentRead"})):
            return None
        raw_keys = batch.get("Keys")
        if not isinstance(raw_keys, list) or not raw_keys:
            return None
        keys = [_exact_key(table, raw) for raw in raw_keys]
        if any(key is None for key in keys):
            return None
        identities = {key.identity for key in keys if key is not None}
        if len(identities) != len(keys):
            return None  # duplicates: moto's error
        items = [item for key in keys if key and (item := _current(table, key))]
        size += sum(item.size() for item in items)
        found[name], counts[name] = items, len(keys)
    if sum(counts.values()) > _MAX_BATCH_KEYS or size > _BATCH_BYTES:
        return None
    result: dict[str, Any] = {"ConsumedCapacity": [], "Responses": {}, "UnprocessedKeys": {}}
    for name, items in found.items():
        result["Responses"][name] = [item.describe_attrs(None)["Item"] for item in items]
        result["ConsumedCapacity"].append({"CapacityUnits": counts[name], "TableName": name})
    return _json(result)


# The key conditions the store sends: the partition, and at most one test of the sort key.
_KEY_CONDITION = re.compile(
    r"(?P<hash>\w+) = (?P<value>:\w+)"
    r"(?: AND (?:(?P<range>\w+) (?P<op><=|>=|=|<|>) (?P<bound>:\w+)"
    r"|(?P<between>\w+) BETWEEN (?P<low>:\w+) AND (?P<high>:\w+)"
    r"|begins_with\((?P<prefixed>\w+), (?P<prefix>:\w+)\)))?"
)
_QUERY_FIELDS = frozenset(
    {
        "TableName",
        "KeyConditionExpression",
        "ExpressionAttributeValues",
        "ExpressionAttributeNames",
        "FilterExpression",
        "ProjectionExpression",
        "ConsistentRead",
        "ScanIndexForward",
        "Limit",
        "ExclusiveStartKey",
    }
)


@dataclass(frozen=True)
class _KeyCondition:
    partition: DynamoType
    # The test of the sort key, by moto's name for it, and its operands (none: every item).
    comparison: str | None
    operands: tuple[str, ...]


def _key_condition(table: Table, request: dict[str, Any]) -> _KeyCondition | None:
    """A KeyConditionExpression of the store's forms on `table`'s own key names (no reserved
    words), every value it names a non-empty string."""
    expression = request.get("KeyConditionExpression")
    values = request.get("ExpressionAttributeValues")
    found = _KEY_CONDITION.fullmatch(expression) if isinstance(expression, str) else None
    if found is None or not isinstance(values, dict):
        return None
    parts = found.groupdict()
    if parts["hash"] != table.hash_key_attr:
        return None
    if parts["op"] is not None:
        comparison, sort_key, placeholders = parts["op"], parts["range"], [parts["bound"]]
    elif parts["between"] is not None:
        comparison, sort_key = "BETWEEN", parts["between"]
        placeholders = [parts["low"], parts["high"]]
    elif parts["prefixed"] is not None:
        comparison, sort_key, placeholders = "BEGINS_WITH", parts["prefixed"], [parts["prefix"]]
    else:
        comparison, sort_key, placeholders = None, None, []
    if sort_key is not None and sort_key != table.range_key_attr:
        return None
    reserved = ReservedKeywords.get_reserved_keywords()
    if any(name.upper() in reserved for name in (parts["hash"], sort_key) if name):
        return None
    texts = []
    for placeholder in (parts["value"], *placeholders):
        value = values.get(placeholder)
        if not isinstance(value, dict) or value.keys() != {"S"}:
            return None
        if not isinstance(value["S"], str) or not value["S"]:
            return None
        texts.append(value["S"])
    return _KeyCondition(DynamoType({"S": texts[0]}), comparison, tuple(texts[1:]))


@dataclass(frozen=True)
class _QueryExpressions:
    """A Query's filter and projection as moto parses them (None: the request has none)."""

    filter: Any
    projection: list[list[str]] | None


def _query_expressions(request: dict[str, Any]) -> _QueryExpressions | None:
    """The filter and projection of a Query whose placeholders are each defined and used
    (moto refuses only unused names; DynamoDB unused values too), its values plain; parsed
    by moto, whose refusals are left to it."""
    names = request.get("ExpressionAttributeNames", {})
    values = request.get("ExpressionAttributeValues", {})
    if not isinstance(names, dict) or not isinstance(values, dict):
        return None
    if ("ExpressionAttributeNames" in request and not names) or not values:
        return None
    texts = [request.get(field) for field in ("FilterExpression", "ProjectionExpression")]
    if any(text is not None and (not isinstance(text, str) or not text.strip()) for text in texts):
        return None
    used = set(_PLACEHOLDER.findall(request["KeyConditionExpression"]))
    used.update(found for text in texts if text for found in _PLACEHOLDER.findall(text))
    if used != names.keys() | values.keys():
        return None
    if not all(_plain(value, binary=False) for value in values.values()):
        return None
    filter_text, projection_text = texts
    try:
        projection = (
            ProjectionExpressionParser(projection_text, names).parse() if projection_text else None
        )
        condition = get_filter_expression(filter_text, names, values) if filter_text else None
    except Exception:  # whatever moto refuses, moto answers
        return None
    return _QueryExpressions(condition, projection)


def query(backend: DynamoDBBackend, params: dict[str, Any]) -> bytes | None:
    """A Query of one partition of a table of the handled shape, answered as moto's
    (`_query.page`, then the filter and the projection), its items encoded straight from
    moto's values."""
    if not _read_fields_ok(params, _QUERY_FIELDS):
        return None
    table = _table(backend, params.get("TableName"))
    condition = _key_condition(table, params) if table is not None else None
    expressions = _query_expressions(params) if condition is not None else None
    limit = params.get("Limit")
    forward = params.get("ScanIndexForward", True)
    start = params.get("ExclusiveStartKey")
    if table is None or condition is None or expressions is None:
        return None
    if not isinstance(forward, bool):
        return None
    if limit is not None and (type(limit) is not int or limit < 1):
        return None
    if start is not None and _exact_key(table, start) is None:
        return None
    found, last_key = _query.page(
        table,
        table.items.get(condition.partition) or {},
        start=None if start is None else start[table.range_key_attr]["S"],
        forward=forward,
        matches=_query.key_test(condition.comparison, condition.operands),
        limit=limit,
    )
    scanned = len(found)
    if expressions.filter is not None:
        found = [item for item in found if expressions.filter.expr(item)]
    if expressions.projection:
        found = [_query.project(item, expressions.projection) for item in found]
    result: dict[str, Any] = {
        "Count": len(found),
        "ScannedCount": scanned,
        "Items": [_attributes(item) for item in found],
    }
    if last_key is not None:
        result["LastEvaluatedKey"] = dynamo_to_dict(last_key)
    return encode(result).encode()


_SCALARS = frozenset({"S", "N", "B"})


def _attributes(item: Item) -> dict[str, Any]:
    """An item as moto's result conversion (`dynamo_to_dict`) leaves it, strings, numbers and
    binary values kept as bytes taken as they are."""
    return {
        name: {value.type: value.value}
        if type(value.value) is (bytes if value.type == "B" else str) and value.type in _SCALARS
        else dynamo_to_dict(value)
        for name, value in item.attrs.items()
    }


_HANDLERS: dict[str, Handler] = {
    "TransactWriteItems": transact_write_items,
    "UpdateItem": update_item,
    "PutItem": put_item,
    "DeleteItem": delete_item,
    "GetItem": get_item,
    "BatchGetItem": batch_get_item,
    "Query": query,
}
