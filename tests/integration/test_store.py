"""The DynamoDB + S3 store against the embedded emulator: invariants of DESIGN.md section 3."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError
from support import FakeClock, store_on

from durable_streams_aws.core.protocol.append import AppendIntent, Verdict
from durable_streams_aws.core.protocol.headers import ProducerClaim
from durable_streams_aws.core.protocol.jsonmode import split_messages
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    CreateSpec,
    CreateStatus,
    DynamoStore,
    Payload,
    Presence,
    StoreUnavailable,
)
from durable_streams_aws.core.storage import _items as items

TEXT = "text/plain"
JSON = "application/json"

pytestmark = pytest.mark.both_dynamodbs


def spec(content_type: str = TEXT, payload: Payload | None = None, **kwargs: Any) -> CreateSpec:
    return CreateSpec(
        content_type,
        kwargs.get("ttl"),
        kwargs.get("expires_at"),
        kwargs.get("closed", False),
        payload or Payload(),
    )


def plain(data: bytes, close: bool = False) -> tuple[AppendIntent, Payload]:
    return AppendIntent(TEXT, bool(data), close), Payload(data)


def json_payload(body: bytes) -> Payload:
    messages = split_messages(body, allow_empty_array=True)
    return Payload(b"".join(messages), tuple(len(m) for m in messages))


def read_all(store: DynamoStore, path: str, max_bytes: int = 10**9) -> bytes:
    info = store.get(path)
    assert info is not None
    out, position = [], 0
    while position < info.tail:
        batch = store.read(info, position, max_bytes)
        assert batch.end > position, "every read makes progress"
        out.append(batch.data)
        position = batch.end
    return b"".join(out)


def other_process(backend: Backend) -> DynamoStore:
    """A second store on the same table and bucket, as another Lambda instance would be."""
    return store_on(backend, inline_max_bytes=backend.settings.inline_max_bytes)


def s3_keys(backend: Backend) -> list[str]:
    listing = backend.s3.list_objects_v2(Bucket=backend.settings.bucket)
    return [o["Key"] for o in listing.get("Contents", [])]


def test_inline_and_s3_chunks_read_back_byte_exact(backend: Backend) -> None:
    store = backend.store
    store.create("s", spec(TEXT, Payload(b"head-")))
    small = bytes(range(256)) * 2  # 512 bytes: inline
    large = bytes(range(256)) * 40  # 10 KiB: above the fixture's 1 KiB inline limit -> S3
    for body in (small, large, small):
        outcome = store.append("s", *plain(body))
        assert outcome.decision is not None and outcome.decision.verdict is Verdict.COMMIT
    assert read_all(store, "s") == b"head-" + small + large + small
    assert len(s3_keys(backend)) == 1
    # Small reads split the S3 chunk with ranged GETs and still reassemble exactly.
    assert read_all(store, "s", max_bytes=777) == b"head-" + small + large + small


def test_reader_never_returns_bytes_past_the_tail_it_read(backend: Backend) -> None:
    store = backend.store
    store.create("s", spec(TEXT, Payload(b"one")))
    snapshot = store.get("s")
    assert snapshot is not None
    store.append("s", *plain(b"two"))  # committed after the snapshot was taken
    batch = store.read(snapshot, 0, 1024)
    assert batch.data == b"one" and batch.end == 3


def test_json_reads_return_whole_messages_within_the_budget(backend: Backend) -> None:
    store = backend.store
    store.create("j", spec(JSON, json_payload(b'[{"a": 1}, "two", [3]]')))
    store.append("j", AppendIntent(JSON, True, False), json_payload(b'{"b" : 2}'))
    info = store.get("j")
    assert info is not None
    # The budget counts the body as served: '[{"a": 1},"two"]' is 16 bytes.
    assert store.read(info, 0, 15).messages == (b'{"a": 1}',)
    batch = store.read(info, 0, 16)
    assert batch.messages == (b'{"a": 1}', b'"two"')
    rest = store.read(info, batch.end, 10**6)
    assert rest.messages == (b"[3]", b'{"b" : 2}') and rest.end == info.tail
    # A single message larger than the budget is still returned, alone.
    assert store.read(info, 0, 1).messages == (b'{"a": 1}',)


@pytest.mark.parametrize("content_type", [TEXT, JSON])
def test_a_catch_up_read_queries_about_the_items_it_serves(
    backend: Backend, content_type: str
) -> None:
    """Each read queries the chunks that end within its budget and an inline chunk's worth
    past it (taking in the one that straddles the budget's end), not a whole further page of
    chunks' bodies."""
    store = backend.store
    store.create("s", spec(content_type))
    body = b'"' + b"x" * 998 + b'"' if content_type == JSON else b"y" * 1000  # inline
    for _ in range(60):
        payload = json_payload(body) if content_type == JSON else Payload(body)
        store.append("s", AppendIntent(content_type, True, False), payload)
    queried: list[int] = []

    def count_items(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "Query":
            queried.append(len(parsed.get("Items", [])))

    store.dynamodb.meta.events.register("after-call", count_items)
    info = store.get("s")
    assert info is not None
    position, reads = 0, 0
    while position < info.tail:
        batch = store.read(info, position, 10_500)  # ten chunks and a half
        served = batch.messages if content_type == JSON else (batch.data,)
        assert b"".join(served) == (body * 60)[position : batch.end]
        position, reads = batch.end, reads + 1
    assert reads == 6
    # The 60 chunks, and per read at most an inline chunk's worth past its budget (the chunk
    # that straddles it, and one more here): the unbounded query read 204.
    past_budget = backend.settings.inline_max_bytes // len(body) + 1
    assert sum(queried) <= 60 + reads * past_budget, queried


def test_large_json_batches_keep_their_message_index_in_s3(backend: Backend) -> None:
    store = backend.store
    body = b"[" + b",".join(b"%d" % i for i in range(20000)) + b"]"
    store.create("j", spec(JSON, json_payload(body)))
    info = store.get("j")
    assert info is not None
    messages: list[bytes] = []
    position = 0
    while position < info.tail:
        batch = store.read(info, position, 30000)
        assert batch.messages is not None
        messages.extend(batch.messages)
        position = batch.end
    assert messages == [b"%d" % i for i in range(20000)]
    assert any(key.endswith(".idx") for key in s3_keys(backend))


def test_lost_race_retries_and_reuses_its_s3_object(backend: Backend, monkeypatch) -> None:
    """A competing commit between our read and our commit: we re-read, re-decide and commit
    once; the large body uploaded before the first attempt is reused, not duplicated."""
    store = backend.store
    store.create("s", spec())
    rival = other_process(backend)
    original = store.chunks.store_body
    calls = itertools.count()

    def store_body_then_lose_race(incarnation: str, payload: Payload):  # type: ignore[no-untyped-def]
        stored = original(incarnation, payload)
        if next(calls) == 0:
            rival.append("s", *plain(b"rival"))
        return stored

    monkeypatch.setattr(store.chunks, "store_body", store_body_then_lose_race)
    big = b"x" * 5000
    outcome = store.append("s", *plain(big))
    assert outcome.info is not None and outcome.info.tail == 5 + 5000
    assert read_all(store, "s") == b"rival" + big
    assert next(calls) == 1, "the body was stored once and reused on the retry"
    assert len(s3_keys(backend)) == 1


def test_producer_commit_is_atomic_with_data_and_deduplicates(backend: Backend) -> None:
    store = backend.store
    store.create("p", spec())
    claim = ProducerClaim("w", 0, 0)
    first = store.append("p", AppendIntent(TEXT, True, False, producer=claim), Payload(b"a"))
    retry = store.append("p", AppendIntent(TEXT, True, False, producer=claim), Payload(b"a"))
    assert first.decision is not None and first.decision.verdict is Verdict.COMMIT
    assert retry.decision is not None and retry.decision.verdict is Verdict.DUPLICATE
    assert read_all(store, "p") == b"a"
    item = backend.dynamodb.get_item(
        TableName=backend.settings.table, Key=items.producer_key("p", "w"), ConsistentRead=True
    )["Item"]
    assert item["sq"]["N"] == "0" and item["inc"]["S"] == first.info.incarnation  # type: ignore[union-attr]


def test_delete_and_recreate_starts_a_fresh_incarnation(backend: Backend) -> None:
    store = backend.store
    store.create("r", spec(TEXT, Payload(b"old")))
    store.append(
        "r", AppendIntent(TEXT, True, False, producer=ProducerClaim("w", 3, 0)), Payload(b"x")
    )
    old = store.get("r")
    assert store.delete("r") is Presence.FOUND
    assert store.get("r") is None
    assert store.delete("r") is Presence.NOT_FOUND
    created = store.create("r", spec(TEXT, Payload(b"new")))
    assert created.status is CreateStatus.CREATED
    assert created.info.incarnation != old.incarnation  # type: ignore[union-attr]
    assert read_all(store, "r") == b"new"
    # Producer state belonged to the old incarnation: epoch 0 is welcome again.
    again = store.append(
        "r", AppendIntent(TEXT, True, False, producer=ProducerClaim("w", 0, 0)), Payload(b"y")
    )
    assert again.decision is not None and again.decision.verdict is Verdict.COMMIT
    retired = backend.dynamodb.get_item(
        TableName=backend.settings.table,
        Key=items.retire_key(old.incarnation),  # type: ignore[union-attr]
    )
    assert retired["Item"]["path"]["S"] == "r"


def test_closure_is_monotonic_and_keeps_the_closing_producer(backend: Backend) -> None:
    store = backend.store
    store.create("c", spec())
    closer = ProducerClaim("w", 0, 0)
    store.append("c", AppendIntent(TEXT, True, True, producer=closer), Payload(b"end"))
    again = store.append("c", *plain(b"", close=True))
    assert again.decision is not None and again.decision.verdict is Verdict.ALREADY_CLOSED
    rejected = store.append("c", *plain(b"more"))
    assert rejected.decision is not None and rejected.decision.verdict is Verdict.CLOSED
    info = store.get("c")
    assert info is not None and info.closed and info.closed_by == closer
    assert read_all(store, "c") == b"end"


def test_create_is_idempotent_and_detects_conflicts(backend: Backend) -> None:
    store = backend.store
    assert store.create("i", spec(ttl=60)).status is CreateStatus.CREATED
    assert store.create("i", spec(ttl=60)).status is CreateStatus.EXISTS
    assert store.create("i", spec(ttl=61)).status is CreateStatus.CONFLICT
    assert store.create("i", spec(closed=True, ttl=60)).status is (CreateStatus.CONFLICT)


def clocked_store(backend: Backend, clock: FakeClock) -> DynamoStore:
    """A store on the test's table whose time moves only when the test moves it."""
    return store_on(backend, clock=clock, renew_fraction=0.1)


def test_ttl_expiry_and_sliding_renewal_without_a_write_per_read(backend: Backend) -> None:
    clock = FakeClock()
    store = clocked_store(backend, clock)
    calls: list[str] = []
    backend.dynamodb.meta.events.register(
        "before-call.dynamodb.UpdateItem", lambda **kw: calls.append("update")
    )
    store.create("t", spec(ttl=100))
    clock.now += 5  # within the 10 s renewal window: reads do not write
    store.renew(store.get("t"))  # type: ignore[arg-type]
    assert calls == []
    clock.now += 90  # 95 s idle: due for renewal
    store.renew(store.get("t"))  # type: ignore[arg-type]
    assert calls == ["update"]
    clock.now += 100  # 100 s after the renewal: the countdown has not run out
    assert store.get("t") is not None
    clock.now += 10  # renewal + TTL + window: expired (at most one window late)
    assert store.get("t") is None
    appended = store.append("t", *plain(b"x"))
    assert appended.presence is Presence.NOT_FOUND
    # An expired path can be created again; the old incarnation is retired.
    assert store.create("t", spec()).status is CreateStatus.CREATED


def test_a_read_inside_the_renewal_window_still_restarts_the_countdown(backend: Backend) -> None:
    """TTL 10 s, window 1 s: a read 0.9 s after the last renewal writes nothing, yet the
    stream must live until that read plus 10 s (10.9 s), not expire at 10 s."""
    clock = FakeClock()
    store = clocked_store(backend, clock)
    store.create("t", spec(ttl=10))
    created = clock.now
    clock.now = created + 0.9
    store.renew(store.get("t"))  # type: ignore[arg-type]
    for alive_at in (10.0, 10.5, 10.89):
        clock.now = created + alive_at
        assert store.get("t") is not None, f"expired early at {alive_at} s"
    clock.now = created + 11.0
    assert store.get("t") is None


def test_renewal_never_resurrects_an_expired_stream(backend: Backend) -> None:
    clock = FakeClock()
    store = clocked_store(backend, clock)
    store.create("t", spec(ttl=10))
    info = store.get("t")
    clock.now += 11
    store.renew(info)  # type: ignore[arg-type]
    assert store.get("t") is None


class ThrottlingDynamo:
    """A DynamoDB client whose every call is throttled, as after botocore's retries."""

    def __init__(self, real: Any) -> None:
        self.meta = real.meta

    def __getattr__(self, name: str) -> Any:
        def throttled(**_: Any) -> Any:
            raise ClientError(
                {
                    "Error": {"Code": "ThrottlingException", "Message": "slow down"},
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                name,
            )

        return throttled


def test_throttling_surfaces_as_store_unavailable(backend: Backend) -> None:
    store = DynamoStore(
        ThrottlingDynamo(backend.dynamodb),
        backend.s3,
        backend.settings.table,
        backend.settings.bucket,
    )
    with pytest.raises(StoreUnavailable):
        store.append("s", *plain(b"x"))
    with pytest.raises(StoreUnavailable):
        store.get("s")


def test_two_processes_with_stale_memories_stay_correct(backend: Backend) -> None:
    """Each store remembers what it last wrote; the other one's writes make that stale. Every
    append must still land once, and nothing may be decided on a stale memory."""
    one = backend.store
    two = other_process(backend)
    one.create("shared", spec())
    expected = b""
    for i in range(10):
        writer = one if i % 3 else two
        writer.append("shared", *plain(b"%d," % i))
        expected += b"%d," % i
    assert read_all(one, "shared") == expected
    # Closed by one process: the other, remembering it open, must not append.
    two.append("shared", *plain(b"", close=True))
    refused = one.append("shared", *plain(b"late"))
    assert refused.decision is not None and refused.decision.verdict is Verdict.CLOSED
    # Deleted and re-created by one process: the other must write to the new incarnation.
    one.create("again", spec())
    one.append("again", *plain(b"old"))
    two.delete("again")
    assert one.append("again", *plain(b"x")).presence is Presence.NOT_FOUND
    two.create("again", spec())
    one.append("again", *plain(b"new"))
    assert read_all(two, "again") == b"new"


def test_sequential_appends_skip_the_read(backend: Backend) -> None:
    store = backend.store
    store.create("hot", spec())
    calls: list[str] = []
    backend.dynamodb.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )
    for _ in range(5):
        store.append("hot", *plain(b"token"))
    assert calls == ["TransactWriteItems"] * 5


class ThrottledBatchReads:
    """A DynamoDB client whose BatchGetItem leaves every key unprocessed (DynamoDB's way of
    saying it throttled them) for its first `throttled` calls."""

    def __init__(self, real: Any, throttled: int) -> None:
        self.real = real
        self.meta = real.meta
        self.remaining = throttled

    def batch_get_item(self, **kwargs: Any) -> Any:
        if self.remaining > 0:
            self.remaining -= 1
            return {"Responses": {}, "UnprocessedKeys": kwargs["RequestItems"]}
        return self.real.batch_get_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_a_throttled_read_backs_off_without_holding_up_other_writers(backend: Backend) -> None:
    """A producer append whose read is throttled backs off; meanwhile another writer of the
    same stream in the same process must get its turn and commit."""
    other_committed = threading.Event()
    waited: list[bool] = []

    def backoff(seconds: float) -> None:
        backing_off.set()
        waited.append(other_committed.wait(10))

    backing_off = threading.Event()
    store = DynamoStore(
        ThrottledBatchReads(backend.dynamodb, throttled=2),
        backend.s3,
        backend.settings.table,
        backend.settings.bucket,
        sleep=backoff,
    )
    store.create("s", spec())
    producer = AppendIntent(TEXT, True, False, producer=ProducerClaim("p", 0, 0))
    results: list[Any] = []
    throttled_writer = threading.Thread(
        target=lambda: results.append(store.append("s", producer, Payload(b"p0,")))
    )
    throttled_writer.start()
    assert backing_off.wait(10)
    other = store.append("s", *plain(b"plain,"))
    other_committed.set()
    throttled_writer.join(20)
    assert other.decision is not None and other.decision.verdict is Verdict.COMMIT
    assert waited == [True, True], "the other writer waited for the throttled one's backoff"
    assert results[0].decision.verdict is Verdict.COMMIT
    assert read_all(store, "s") == b"plain,p0,"
    assert store.turns.active() == 0, "a finished writer left its turn behind"


def test_reads_throttled_past_the_budget_surface_as_unavailable(backend: Backend) -> None:
    pauses: list[float] = []
    store = DynamoStore(
        ThrottledBatchReads(backend.dynamodb, throttled=100),
        backend.s3,
        backend.settings.table,
        backend.settings.bucket,
        sleep=pauses.append,
    )
    store.create("s", spec())
    producer = AppendIntent(TEXT, True, False, producer=ProducerClaim("p", 0, 0))
    with pytest.raises(StoreUnavailable):
        store.append("s", producer, Payload(b"x"))
    assert pauses == [0.025 * 2**n for n in range(8)]
    assert read_all(store, "s") == b""


def test_an_append_never_moves_the_access_time_back(backend: Backend) -> None:
    """The writer reads its clock, then (a slow network, a retried call) another instance
    serves a read and records a later access, then the append commits. The stream must live
    until that read plus the TTL, so the append may not put the older time back."""
    clock = FakeClock()
    writer, reader = store_on(backend, clock=clock), store_on(backend, clock=clock)
    writer.create("t", spec(ttl=10))  # renewal window 1 s
    started = clock.now
    clock.now = started + 5
    commit = writer.appender._commit_direct

    def commit_after_a_read_elsewhere(*args: Any, **kwargs: Any) -> None:
        clock.now = started + 7
        reader.renew(reader.get("t"))  # type: ignore[arg-type]
        commit(*args, **kwargs)

    writer.appender._commit_direct = commit_after_a_read_elsewhere  # type: ignore[method-assign]
    assert writer.append("t", *plain(b"x")).decision.verdict is Verdict.COMMIT  # type: ignore[union-attr]
    clock.now = started + 16.9
    assert reader.get("t") is not None, "expired before the read at 7 s plus the TTL"
    assert read_all(reader, "t") == b"x"


@pytest.mark.parametrize("body", [b"", b"x" * 10, b"y" * 5000])
def test_a_create_whose_answer_was_lost_reports_that_it_created(
    backend: Backend, body: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit lands but its answer is lost, and botocore's retry conflicts with it: the
    stream the next attempt finds is this create's own, so it reports CREATED (201)."""
    from durable_streams_aws.core.storage.aws import Conflict

    store = store_on(backend)
    real_write = store.write
    calls = []

    def write_then_lose_the_answer(actions: list[dict[str, Any]]) -> None:
        calls.append(actions)
        real_write(actions)
        if len(calls) == 1:
            raise Conflict("the retry met the write it repeats")

    monkeypatch.setattr(store, "write", write_then_lose_the_answer)
    outcome = store.create("lost", spec(payload=Payload(body)))
    assert outcome.status is CreateStatus.CREATED
    assert len(calls) == 1
    assert read_all(store, "lost") == body
    # A second create of the same path is not this one: it finds the stream existing.
    assert store.create("lost", spec()).status is CreateStatus.EXISTS
