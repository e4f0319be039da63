"""Two store instances on one table and bucket (as two Lambda instances are), racing a
delete-and-recreate of the path one of them is writing to.

Whatever the interleaving, an acknowledged write must survive the collector: its bytes (and a
JSON batch's message index) must be stored under the incarnation it was committed to. Each test
runs the collector with no orphan grace right after the race and then reads every byte back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from storage_checks import assert_data_bound_to_incarnations, assert_live_streams_read_back
from support import FakeClock, store_on

from durable_streams_aws.core.protocol.append import AppendIntent, Verdict
from durable_streams_aws.core.protocol.headers import ProducerClaim
from durable_streams_aws.core.protocol.jsonmode import split_messages
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    Collector,
    CreateSpec,
    CreateStatus,
    DynamoStore,
    Payload,
    Presence,
)

TEXT = "text/plain"
JSON = "application/json"
INLINE_MAX = 64

SMALL = b"small"
LARGE = b"L" * 5000  # above the inline limit: stored in S3 before the commit
JSON_MANY = b"[" + b",".join(b"%d" % i for i in range(20000)) + b"]"  # index goes to S3 too

pytestmark = pytest.mark.both_dynamodbs


def instance(backend: Backend, clock: FakeClock | None = None) -> DynamoStore:
    extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
    return store_on(backend, inline_max_bytes=INLINE_MAX, **extra)


def payload(content_type: str, body: bytes) -> Payload:
    if content_type == JSON:
        messages = split_messages(body, allow_empty_array=True)
        return Payload(b"".join(messages), tuple(len(m) for m in messages))
    return Payload(body)


def append(store: DynamoStore, path: str, content_type: str, body: bytes) -> Any:
    return store.append(path, AppendIntent(content_type, True, False), payload(content_type, body))


def read_all(store: DynamoStore, path: str) -> bytes:
    info = store.get(path)
    assert info is not None
    out, position = [], 0
    while position < info.tail:
        batch = store.read(info, position, 1 << 20)
        out.append(b"".join(batch.messages) if batch.messages is not None else batch.data)
        position = batch.end
    return b"".join(out)


def collect_and_check(backend: Backend, store: DynamoStore, clock: FakeClock | None = None) -> None:
    extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
    Collector(store, orphan_grace_seconds=0, **extra).run()
    assert_data_bound_to_incarnations(backend)
    assert_live_streams_read_back(backend, store)


BODIES = [
    pytest.param(TEXT, SMALL, id="small-inline"),
    pytest.param(TEXT, LARGE, id="large-s3"),
    pytest.param(JSON, JSON_MANY, id="json-with-s3-index"),
]


@pytest.mark.parametrize(("content_type", "body"), BODIES)
def test_writer_remembering_the_old_incarnation_commits_to_the_new_one(
    backend: Backend, content_type: str, body: bytes
) -> None:
    """Instance one last wrote incarnation A; instance two deletes and recreates the path (B).
    One's next append fails its commit on A, re-reads and lands in B: its body must be B's."""
    one, two = instance(backend), instance(backend)
    for round_number in range(3):
        path = f"s{round_number}"
        one.create(path, CreateSpec(content_type))
        append(one, path, content_type, b'"first"' if content_type == JSON else b"first")
        assert two.delete(path) is Presence.FOUND
        assert two.create(path, CreateSpec(content_type)).status is CreateStatus.CREATED
        outcome = append(one, path, content_type, body)
        assert outcome.decision.verdict is Verdict.COMMIT
        collect_and_check(backend, two)
        assert read_all(two, path) == payload(content_type, body).data


@pytest.mark.parametrize(("content_type", "body"), BODIES)
def test_recreate_between_upload_and_commit(
    backend: Backend, content_type: str, body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path is deleted and recreated after the body went to S3 but before the commit."""
    one, two = instance(backend), instance(backend)
    one.create("s", CreateSpec(content_type))
    one.recent.forget("s")  # the append reads first: the race is after that read
    original: Callable[..., Any] = one.chunks.store_body
    raced = []

    def store_body_then_recreate(*args: Any, **kwargs: Any) -> Any:
        stored = original(*args, **kwargs)
        if not raced:
            raced.append(True)
            two.delete("s")
            two.create("s", CreateSpec(content_type))
        return stored

    monkeypatch.setattr(one.chunks, "store_body", store_body_then_recreate)
    outcome = append(one, "s", content_type, body)
    assert raced and outcome.decision.verdict is Verdict.COMMIT
    collect_and_check(backend, two)
    assert read_all(two, "s") == payload(content_type, body).data


@pytest.mark.parametrize(("content_type", "body"), BODIES)
def test_create_replacing_an_expired_stream_keeps_its_body(
    backend: Backend, content_type: str, body: bytes
) -> None:
    """A create over an expired stream: the first commit attempt meets the stream reaped under
    it and retries; the body uploaded for the attempt must belong to what is committed."""
    clock = FakeClock()
    one, two = instance(backend, clock), instance(backend, clock)
    two.create("s", CreateSpec(content_type, ttl_seconds=5))
    clock.now += 10
    created = one.create("s", CreateSpec(content_type, payload=payload(content_type, body)))
    assert created.status is CreateStatus.CREATED
    collect_and_check(backend, two, clock)
    assert read_all(two, "s") == payload(content_type, body).data


def test_create_losing_to_another_instance_leaves_only_an_orphan(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One uploads a create's body; two creates the path first. One reports the existing
    stream (same configuration: an idempotent success), its upload is an orphan the collector
    removes, and two's stream is intact."""
    one, two = instance(backend), instance(backend)
    original: Callable[..., Any] = one.chunks.store_body

    def store_body_then_lose(*args: Any, **kwargs: Any) -> Any:
        stored = original(*args, **kwargs)
        two.create("s", CreateSpec(TEXT, payload=Payload(b"two's " + LARGE)))
        return stored

    monkeypatch.setattr(one.chunks, "store_body", store_body_then_lose)
    outcome = one.create("s", CreateSpec(TEXT, payload=Payload(LARGE)))
    assert outcome.status is CreateStatus.EXISTS
    report = Collector(two, orphan_grace_seconds=0).run()
    assert report.orphans_deleted == 1
    assert_data_bound_to_incarnations(backend)
    assert read_all(two, "s") == b"two's " + LARGE


class RivalAfterQuery:
    """A DynamoDB client that runs `rival` once, right after the first query that returns a
    producer item: the collector has listed the item, and has not yet deleted it."""

    def __init__(self, real: Any, rival: Callable[[], None]) -> None:
        self.real, self.meta, self.rival = real, real.meta, rival
        self.raced = False

    def query(self, **kwargs: Any) -> Any:
        response = self.real.query(**kwargs)
        listed = any(item["sk"]["S"].startswith("p#") for item in response.get("Items", []))
        if listed and not self.raced:
            self.raced = True
            self.rival()
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_collector_never_deletes_producer_state_of_the_new_incarnation(
    backend: Backend,
) -> None:
    """The collector lists the retired incarnation's producer items, and before it deletes
    them the same producer writes to the re-created stream (same item key, new incarnation).
    That state must survive: otherwise the producer's retry would be appended a second time."""
    store = instance(backend)
    producer_append = AppendIntent(TEXT, True, False, producer=ProducerClaim("w", 0, 0))
    store.create("s", CreateSpec(TEXT))
    store.append("s", producer_append, Payload(b"old"))
    store.delete("s")
    store.create("s", CreateSpec(TEXT))

    def rival() -> None:
        assert store.append("s", producer_append, Payload(b"new")).decision.commits

    client = RivalAfterQuery(backend.dynamodb, rival)
    collecting = DynamoStore(client, backend.s3, backend.settings.table, backend.settings.bucket)
    Collector(collecting, orphan_grace_seconds=0).run()
    assert client.raced
    retry = store.append("s", producer_append, Payload(b"new"))
    assert retry.decision.verdict is Verdict.DUPLICATE
    assert read_all(store, "s") == b"new"
