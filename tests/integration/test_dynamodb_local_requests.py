"""The twin of `test_store_fast_paths.py` on Amazon's DynamoDB Local: every request shape the
store builds (`core.storage._requests`) and every kind of request the subscription store
sends is sent to DynamoDB's own parser and validation at least once, and none is refused as
invalid. A new shape needs a flow here, or this fails; a request DynamoDB refuses is fixed in
the store, never in the emulators.

Each request is followed from what built it to what DynamoDB Local answered: the output of
each `_requests` function is looked for in the requests the client then sends (a whole
request, a transaction's action, or a producer's item inside one), the subscription store's
method that sent a request is the one on the stack, and each answer is read for the refusals
that say a request itself is wrong (a ValidationException, or a transaction canceled with
`ValidationError` as one action's reason). A refused condition (ConditionalCheckFailed, a
canceled transaction whose reason is that) is an accepted request: DynamoDB parsed and
evaluated it. Every other request the flows send (chunks, sealing, collection) is checked for
refusals too."""

from __future__ import annotations

import ast
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import pytest
from botocore import xform_name
from botocore.exceptions import ClientError
from support import DYNAMODB_LOCAL, FakeClock
from test_store_fast_paths import SHAPES, note_shapes, store_workload
from test_subscription_service import (
    ROOT,
    Hook,
    complete,
    create_stream,
    instance,
    pull,
    run_all,
    webhook,
)

from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, Payload
from durable_streams_aws.core.storage.aws import when_made
from durable_streams_aws.core.subscriptions.store import SubscriptionStore

pytestmark = pytest.mark.parametrize("dynamodb_kind", [DYNAMODB_LOCAL], indirect=True)

# Codes that say a request itself is wrong, whatever the data: DynamoDB refuses it before
# looking at any item.
_INVALID = {"ValidationException", "SerializationException", "UnknownOperationException"}
# A transaction's reason for one action DynamoDB found wrong in itself.
_INVALID_REASON = "ValidationError"
_CONTEXT_KEY = "dynamodb_local_requests"


@dataclass
class Answered:
    """One request DynamoDB Local answered."""

    operation: str  # as the client names it: put_item, transact_write_items, ...
    request: dict[str, Any]
    # The `_requests` functions whose output it carried, with the transaction action each is
    # in (None: the request itself, or a batch).
    shapes: list[tuple[str, int | None]]
    method: str | None  # the SubscriptionStore method that sent it, if one did
    refusals: list[str]  # why DynamoDB found it, or one of its actions, wrong in itself

    def summary(self) -> str:
        return f"{self.operation} by {self.method or self.shapes}: {self.refusals}"


@dataclass
class Requests:
    """Every DynamoDB request sent while a test runs, what built it and how it was answered."""

    answered: list[Answered] = field(default_factory=list)
    _built: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # not yet seen sent
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def built(self, name: str, request: Any) -> None:
        with self._lock:
            self._built.append((name, request))

    def before(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        # The context is the one the same call's `after-call` is given.
        context[_CONTEXT_KEY] = (params, self._shapes_in(params), _sending_method())

    def after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        request, shapes, method = context.get(_CONTEXT_KEY, ({}, [], None))
        error = parsed.get("Error", {})
        refusals = []
        if error.get("Code") in _INVALID:
            refusals.append(f"{error['Code']}: {error.get('Message', '')}")
        for index, reason in enumerate(parsed.get("CancellationReasons") or []):
            if reason.get("Code") == _INVALID_REASON:
                refusals.append(f"action {index}: {reason.get('Message', '')}")
        answer = Answered(xform_name(model.name), request, shapes, method, refusals)
        with self._lock:
            self.answered.append(answer)

    def _shapes_in(self, params: dict[str, Any]) -> list[tuple[str, int | None]]:
        """The built requests this one carries, each taken off the list of those not yet sent
        (the list stays short: what is built is sent at once, or never)."""
        places: list[tuple[dict[str, Any], int | None]] = [(params, None)]
        for index, action in enumerate(params.get("TransactItems", [])):
            places.extend((node, index) for node in _dicts(action))
        places.extend((node, None) for node in _dicts(params.get("RequestItems", {})))
        found: list[tuple[str, int | None]] = []
        with self._lock:
            waiting = []
            for name, built in self._built:
                where = next((i for node, i in places if _carries(node, built)), _NOWHERE)
                if where is _NOWHERE:
                    waiting.append((name, built))
                else:
                    found.append((name, where))
            self._built = waiting
        return found

    def shapes_sent(self) -> set[str]:
        return {name for answer in self.answered for name, _ in answer.shapes}

    def refused(self) -> list[str]:
        return [answer.summary() for answer in self.answered if answer.refusals]

    def by(self, method: str) -> list[Answered]:
        return [answer for answer in self.answered if answer.method == method]


_NOWHERE: Any = object()


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _dicts(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _dicts(inner)


def _carries(node: dict[str, Any], built: dict[str, Any]) -> bool:
    """Whether `node` holds everything `built` does (a caller may add to a built request: a
    page's start key, ReturnValues)."""
    return bool(built) and all(key in node and node[key] == value for key, value in built.items())


# The subscription store's methods by their code, to find the one sending a request.
_STORE_METHODS: dict[CodeType, str] = {
    function.__code__: name
    for name, function in vars(SubscriptionStore).items()
    if inspect.isfunction(function)
}


def _sending_method() -> str | None:
    """The innermost SubscriptionStore method on this thread's stack (the hook runs inside the
    client call; a paged read's generator has the method iterating it below it)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code in _STORE_METHODS:
            return _STORE_METHODS[frame.f_code]
        frame = frame.f_back
    return None


def _store_requests() -> set[tuple[str, str]]:
    """Each (method, operation) the subscription store's source sends: every
    `self.dynamodb.<operation>` in one of its methods."""
    (definition,) = ast.parse(inspect.getsource(SubscriptionStore)).body
    assert isinstance(definition, ast.ClassDef)
    kinds = set()
    for method in definition.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        for node in ast.walk(method):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "dynamodb"
                and isinstance(node.value.value, ast.Name)
                and node.value.value.id == "self"
            ):
                kinds.add((method.name, node.attr))
    return kinds


# The subscription store's requests whose expressions depend on the call (an expression value
# only some forms use is what DynamoDB refuses and moto accepts): each form must be sent.
_FORMS: dict[tuple[str, str], Callable[[dict[str, Any]], bool]] = {
    ("insert", "where none lives"): lambda r: "attribute_not_exists" in r["ConditionExpression"],
    ("insert", "over a tombstone"): lambda r: "#del" in r["ConditionExpression"],
    ("link", "marking one kind"): lambda r: ":no" in r["ExpressionAttributeValues"],
    ("link", "marking both kinds"): lambda r: ":no" not in r["ExpressionAttributeValues"],
    ("link", "at a stream's tail"): lambda r: ":inc" in r["ExpressionAttributeValues"],
    ("link", "from the beginning"): lambda r: ":inc" not in r["ExpressionAttributeValues"],
    ("replace_with_acks", "moving cursors"): lambda r: len(r["TransactItems"]) > 1,
}


@pytest.fixture
def sent(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Requests:
    seen = Requests()

    def hooks(client: Any) -> None:
        client.meta.events.register("before-parameter-build.dynamodb", seen.before)
        client.meta.events.register("after-call.dynamodb", seen.after)

    note_shapes(monkeypatch, seen.built)
    when_made(backend.dynamodb, hooks)  # each test's backend has clients of its own
    return seen


def test_every_store_request_shape_is_one_dynamodb_accepts(
    backend: Backend, sent: Requests
) -> None:
    store_workload(backend)
    assert sent.refused() == []
    assert sent.shapes_sent() == set(SHAPES), set(SHAPES) - sent.shapes_sent()
    # What moto accepts and DynamoDB does not, seen by the check above.
    with pytest.raises(ClientError):
        backend.dynamodb.put_item(
            TableName=backend.settings.table,
            Item={"pk": {"S": "x"}, "sk": {"S": "y"}},
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={":unused": {"S": "v"}},
        )
    (refused,) = sent.refused()
    assert "unused" in refused


def test_every_subscription_store_request_is_one_dynamodb_accepts(
    backend: Backend, sent: Requests
) -> None:
    clock = FakeClock(time.time())
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    store = backend.store
    create_stream(store, "jobs/old", b"history")  # backfilled at its tail by the creation
    store.create("wake/pool", CreateSpec("application/json", None, None, False, Payload()))
    service.create("p", pull(), ROOT)
    create_stream(store, "jobs/new", b"work")
    service.changed("jobs/new")
    run_all((service, tasks))  # notice, links, tails, the wake appended to the wake stream
    won = service.claim("p", "w")
    acks = [{"stream": s.path, "offset": format_offset(s.tail)} for s in won.streams]
    wake = won.subscription.wake
    assert wake is not None
    body = {"wake_id": wake.wake_id, "generation": wake.generation, "acks": acks, "done": True}
    complete(service, "p", f"Bearer {won.token}", json.dumps(body).encode())
    service.create("s", webhook(streams=["solo/x"]), ROOT)
    service.add_streams("s", ("jobs/new",))
    service.remove_stream("s", "jobs/new")  # the pattern still names it: kept, as glob
    service.remove_stream("s", "solo/x")  # nothing else names it: deleted
    service.describe("s")
    service.remove("s")  # its links dropped
    service.create("s", webhook(), ROOT)  # over its tombstone
    service.sweep()
    assert sent.refused() == []
    made = {(a.method, a.operation) for a in sent.answered if a.method is not None}
    assert made == _store_requests(), _store_requests() - made
    missing = [
        f"{method} {form}"
        for (method, form), shown in _FORMS.items()
        if not any(shown(a.request) for a in sent.by(method))
    ]
    assert missing == []
