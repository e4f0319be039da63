"""Every request the store sends is one the emulator's fast paths answer.

The fast paths (`infra.moto_patches._item_requests`, `._condition_builder`, `._query`)
answer only the forms the store sends; anything else still works, through moto's slow path,
so a changed expression would silently make every local run and test slower. This runs the
store's flows (create, the append paths, close, fork, read, renewal, delete, expiry, sealing
and collection) with the fast paths observed, and fails on any item request moto answered
with success (the fast layer only ever answers success: a refused condition is moto's to
answer, by design), but for the few rare forms left to moto on purpose (`_left_to_moto`), on
any condition left to moto's parser, and on any Query left to moto's. It also fails when a
request shape of `core.storage._requests` was not sent at all: a new shape needs a step
here.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import FakeClock, store_on
from test_hot_streams import plain, produced, read_all

from durable_streams_aws.core.protocol.append import AppendIntent, Verdict
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    AppendOutcome,
    Collector,
    CreateSpec,
    DynamoStore,
    ForkRequest,
    Payload,
    Presence,
    Sealer,
    StreamInfo,
)
from durable_streams_aws.core.storage import _requests as requests
from durable_streams_aws.core.storage._seal_plan import SealPolicy
from durable_streams_aws.core.storage._settle import Claim
from durable_streams_aws.infra.moto_patches import _condition_builder as _fast_conditions
from durable_streams_aws.infra.moto_patches import _item_requests as _fast_item_requests
from durable_streams_aws.infra.moto_patches import _query as _moto_fast_query

TEXT = "text/plain"
JSON = "application/json"
VOID_AFTER = 0.4


@dataclass
class SlowPaths:
    """What the fast paths left to moto while the workload ran (on its own table: the
    session's emulator serves other tests' tables too), and the request shapes it built."""

    table: str
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    conditions: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    built: set[str] = field(default_factory=set)  # the `_requests` functions called

    def request(self, operation: str, body: bytes, status: str) -> None:
        if self.table.encode() not in body:
            return
        if status.startswith("200"):
            self.requests.append((operation, json.loads(body)))
        else:
            self.refused.append(operation)

    def unexpected(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            (operation, request)
            for operation, request in self.requests
            if not _left_to_moto(request)
        ]


def _request_shapes() -> dict[str, Callable[..., Any]]:
    return {
        name: function
        for name, function in vars(requests).items()
        if inspect.isfunction(function)
        and function.__module__ == requests.__name__
        and not name.startswith("_")
    }


SHAPES = _request_shapes()
# Told of each request shape built: the function's name and what it answered.
Built = Callable[[str, Any], object]


def _noting(
    built: set[str], name: str, function: Callable[..., Any], each: Built | None
) -> Callable[..., Any]:
    def building(*args: Any, **kwargs: Any) -> Any:
        built.add(name)
        request = function(*args, **kwargs)
        if each is not None:
            each(name, request)
        return request

    return building


def _summary(requests: list[tuple[str, dict[str, Any]]]) -> str:
    """The expressions of each request (the items' data is noise here)."""
    shown = []
    for operation, request in requests:
        entries = [next(iter(e.values())) for e in request.get("TransactItems", [])] or [request]
        forms = [
            {
                k: v
                for k, v in entry.items()
                if "Expression" in k or k == "ExpressionAttributeValues"
            }
            for entry in entries
        ]
        shown.append(f"{operation}: {json.dumps(forms)}")
    return "\n".join(shown)


def _left_to_moto(request: dict[str, Any]) -> bool:
    """The store's requests the fast layer leaves to moto on purpose, all rare: a hard
    delete's transaction (its Delete, and for a fork the release of its source, which counts
    down), and the lifting of a hold by an append refused after it placed one (a REMOVE)."""
    entries = request.get("TransactItems")
    if entries is not None:
        return any("Delete" in entry for entry in entries)
    return str(request.get("UpdateExpression", "")).startswith("REMOVE ")


@pytest.fixture
def slow(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowPaths]:
    seen = SlowPaths(backend.settings.table)
    build = _fast_conditions.build

    def building(condition: str, names: dict[str, str], values: dict[str, Any]) -> Any:
        built = build(condition, names, values)
        if built is None:
            seen.conditions.append(condition)
        return built

    monkeypatch.setattr(_fast_conditions, "build", building)
    seen.built = note_shapes(monkeypatch)
    _fast_item_requests.observe(seen.request)
    _moto_fast_query.observe(
        lambda table: seen.queries.append(table.name) if table.name == seen.table else None
    )
    try:
        yield seen
    finally:
        _fast_item_requests.observe(None)
        _moto_fast_query.observe(None)


def committed(store: DynamoStore, path: str, request: tuple[AppendIntent, Payload]) -> None:
    outcome = store.append(path, *request)
    assert outcome.decision is not None and outcome.decision.verdict is Verdict.COMMIT


def direct_appends(backend: Backend, store: DynamoStore) -> None:
    """Creates and direct commits: plain, large (in S3), producers, Stream-Seq, a close."""
    store.create("a", CreateSpec(TEXT, payload=Payload(b"first;")))
    store.create("j", CreateSpec(JSON, payload=Payload(b'{"n":0}', (7,))))
    committed(store, "a", plain(b"plain;"))
    committed(store, "a", plain(b"x" * 3000 + b";"))  # stored in S3
    for seq in range(3):
        committed(store, "a", produced("p", seq, b"produced;"))
    committed(store, "a", plain(b"seq;", seq="0001"))
    duplicate = store.append("a", *produced("p", 1, b"produced;"))
    assert duplicate.decision is not None and duplicate.decision.verdict is Verdict.DUPLICATE
    # Another instance reads the stream and its producer instead of remembering them.
    committed(store_on(backend), "a", produced("p", 3, b"produced;"))
    committed(store, "a", produced("p", 4, b"produced;"))  # a gap by memory: read again
    committed(store_on(backend), "a", plain(b"other;"))
    committed(store, "a", plain(b"stale;"))  # a stale memory: a lost race
    store.create("c", CreateSpec(TEXT))
    committed(store, "c", plain(b"last;", close=True))
    assert store.append("c", *plain(b"late;")).decision.verdict is not Verdict.COMMIT


def group_commits(store: DynamoStore) -> None:
    """Threads of one process appending at once: shared transactions."""
    store.create("g", CreateSpec(TEXT))
    threads = [
        threading.Thread(target=committed, args=(store, "g", produced(f"w{i}", 0, b"g;")))
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read_all(store, "g") == b"g;" * 8


def reserved_appends(backend: Backend, clock: FakeClock) -> None:
    """Instances appending to one stream at once: reserved ranges, filled, settled, published,
    a pending one voided, and a close that waits for the ranges below it."""
    stores = [store_on(backend, clock=clock, void_after=VOID_AFTER) for _ in range(3)]
    stores[0].create("h", CreateSpec(TEXT))
    for store in stores:
        store.recent.mark_hot("h")
    for index in range(12):
        store = stores[index % 3]
        request = produced("q", index // 2, b"q;") if index % 2 else plain(b"r;")
        committed(store, "h", request)
    info = stores[0].get("h")
    assert info is not None
    stores[1].appender._reserve(info, 2)  # a writer that dies before it fills its range
    clock.now += VOID_AFTER + 1  # ... is voided by the next reader
    assert stores[2].get("h") is not None
    given_up = stores[1].appender._reserve(info, 2)  # a writer that gives its range up
    end, number = given_up.reserved_end, given_up.ranges
    for _ in range(2):  # the second time, its claim says it is void already
        assert stores[1].settler.void_own(given_up, end - 2, end, number) is Claim.VOID
    committed(stores[0], "h", plain(b"s;", seq="0005"))
    stale = behind_a_pending_range(stores, clock, info, plain(b"old;", seq="0001"))
    assert stale.decision is not None and stale.decision.verdict is not Verdict.COMMIT
    closing = behind_a_pending_range(stores, clock, info, plain(b"end;", close=True))
    assert closing.decision is not None and closing.decision.verdict is Verdict.COMMIT


def behind_a_pending_range(
    stores: list[DynamoStore],
    clock: FakeClock,
    info: StreamInfo,
    request: tuple[AppendIntent, Payload],
) -> AppendOutcome:
    """A direct append (a close, Stream-Seq) made while a range below it is pending: it holds
    reservations off until the range is voided, then is decided."""
    stores[1].appender._reserve(info, 2)  # a writer that dies before it fills its range
    answers: list[AppendOutcome] = []
    waiting = threading.Thread(target=lambda: answers.append(stores[0].append("h", *request)))
    waiting.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and waiting.is_alive():
        held = stores[2].snapshot("h")
        if held is not None and held.held_until > clock.now:
            break
        time.sleep(0.01)
    clock.now += VOID_AFTER + 1  # the pending range is voided, and the append goes on
    waiting.join()
    return answers[0]


def forks_and_lifecycle(store: DynamoStore, clock: FakeClock) -> None:
    """Forks (byte and JSON), reads across them, renewal, listing, deletes and expiry."""
    store.create("f", CreateSpec(None, fork=ForkRequest("a", 6, 3)))
    committed(store, "f", plain(b"fork;"))
    assert read_all(store, "f") == b"first;pla" + b"fork;"
    committed(store, "j", (AppendIntent(JSON, True, False), Payload(b'{"n":1}', (7,))))
    store.create("k", CreateSpec(None, fork=ForkRequest("j", 0, 1)))
    fork = store.get("k")
    assert fork is not None and store.read(fork, 0, 1 << 20).messages == (b'{"n":0}',)
    source = store.get("a")
    assert source is not None
    list(store.boundaries(source, 0, 20))
    store.create("t", CreateSpec(TEXT, ttl_seconds=100, payload=Payload(b"ttl;")))
    store.create("e", CreateSpec(TEXT, expires_at=clock.now + 1000, payload=Payload(b"exp;")))
    store.create("ef", CreateSpec(None, ttl_seconds=100, fork=ForkRequest("e", 2)))
    store.create("tf", CreateSpec(None, fork=ForkRequest("t", None)))
    clock.now += 50
    info = store.get("t")  # reads renew the sliding TTL
    assert info is not None
    store.renew(info)
    assert "j" in store.list_streams("", None, 100).paths
    # The console's operator reads: a stream's producers and its forks.
    assert store.forks_of("j") == ["k"]
    assert store.producers(fork) == []
    assert store.delete("a") is Presence.FOUND  # forked: soft-deleted
    assert store.delete("f") is Presence.FOUND  # its last fork: both go (cascade)
    assert store.get("a") is None
    assert store.delete("c") is Presence.FOUND
    clock.now += 200  # "t" and its fork expire: reaped on sight
    expired = store.get("t")
    assert expired is not None and expired.soft_deleted  # a fork still reads it
    assert store.get("tf") is None  # ... and goes, taking its source with it
    assert store.get("t") is None


def maintenance(store: DynamoStore, clock: FakeClock) -> None:
    """The sealer (marked streams, and others on demand) and the collector."""
    sealer = Sealer(store, SealPolicy(segment_bytes=64, hot_bytes=0, page_bytes=64))
    assert sealer.run().segments_written > 0  # the closed streams
    assert sealer.seal("g", "j").segments_written > 0
    assert read_all(store, "h").startswith(b"r;q;")
    assert Collector(store, orphan_grace_seconds=0, clock=clock).run().incarnations_removed > 0


def store_workload(backend: Backend) -> None:
    """Every flow above, which together build every request shape of `_requests` (the twin
    on DynamoDB Local, `test_dynamodb_local_requests.py`, runs it too)."""
    clock = FakeClock(time.time())
    store = store_on(backend, clock=clock, void_after=VOID_AFTER)
    direct_appends(backend, store)
    group_commits(store)
    reserved_appends(backend, clock)
    forks_and_lifecycle(store, clock)
    maintenance(store, clock)


def note_shapes(monkeypatch: pytest.MonkeyPatch, each: Built | None = None) -> set[str]:
    """The names of the `_requests` functions called from now on (the set fills as they are);
    `each`, when given, is told each one's name and what it built."""
    built: set[str] = set()
    for name, function in SHAPES.items():
        monkeypatch.setattr(requests, name, _noting(built, name, function, each))
    return built


def test_every_request_the_store_sends_is_answered_fast(backend: Backend, slow: SlowPaths) -> None:
    store_workload(backend)
    assert slow.unexpected() == [], _summary(slow.unexpected())
    assert slow.conditions == []
    assert slow.queries == []
    # The workload did reach what is left to moto (refused conditions, hard deletes, a
    # lifted hold), and sent every request shape of `core.storage._requests`.
    assert slow.requests and slow.refused
    assert slow.built == set(SHAPES), set(SHAPES) - slow.built
