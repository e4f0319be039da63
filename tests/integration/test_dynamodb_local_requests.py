"""The twin of `test_store_fast_paths.py` on Amazon's DynamoDB Local: every request shape the
store builds (`core.storage._requests`) and every kind of request the subscription store
sends is sent to DynamoDB's own parser and validation at least once, and none is refused as
invalid. A new shape needs a flow here, or this fails; a request DynamoDB refuses is fixed in
the store, never in the emulators."""

from __future__ import annotations

import inspect
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
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


@pytest.fixture
def refused(backend: Backend) -> Iterator[Counter[str]]:
    """Each request DynamoDB Local refused as invalid, by operation and message."""
    found: Counter[str] = Counter()

    def after_call(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        code = parsed.get("Error", {}).get("Code", "")
        if code in _INVALID:
            found[f"{model.name}: {parsed['Error'].get('Message', '')}"] += 1

    when_made(backend.dynamodb, lambda c: c.meta.events.register("after-call.dynamodb", after_call))
    yield found


def test_every_store_request_shape_is_one_dynamodb_accepts(
    backend: Backend, refused: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    built = note_shapes(monkeypatch)
    store_workload(backend)
    assert refused == Counter()
    assert built == set(SHAPES), set(SHAPES) - built
    # What moto accepts and DynamoDB does not, seen by the check above.
    with pytest.raises(ClientError):
        backend.dynamodb.put_item(
            TableName=backend.settings.table,
            Item={"pk": {"S": "x"}, "sk": {"S": "y"}},
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={":unused": {"S": "v"}},
        )
    assert sum(refused.values()) == 1, refused


def _subscription_requests() -> dict[str, Callable[..., Any]]:
    """The subscription store's public methods: each sends its own kind of request."""
    return {
        name: method
        for name, method in vars(SubscriptionStore).items()
        if inspect.isfunction(method) and not name.startswith("_")
    }


def test_every_subscription_store_request_is_one_dynamodb_accepts(
    backend: Backend, refused: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    called: set[str] = set()
    for name, method in _subscription_requests().items():

        def calling(*args: Any, _name: str = name, _method: Any = method, **kwargs: Any) -> Any:
            called.add(_name)
            return _method(*args, **kwargs)

        monkeypatch.setattr(SubscriptionStore, name, calling)
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
    assert refused == Counter()
    assert called == set(_subscription_requests()), set(_subscription_requests()) - called
