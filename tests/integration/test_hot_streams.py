"""Many writers on one stream, each a store of its own (as Lambda instances are): reserved
ranges instead of races for the tail, and everything around them: writers that die between
reserving and filling, readers at a pending range, closes, Stream-Seq, producers that
pipeline out of order, forks and the sealer."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from starlette.testclient import TestClient
from support import store_on

from benchmarks.aws_calls import CallMeter
from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.protocol.append import AppendIntent, Verdict
from durable_streams_aws.core.protocol.headers import ProducerClaim
from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, DynamoStore, ForkRequest, Payload, Sealer
from durable_streams_aws.core.storage import _items as items
from durable_streams_aws.core.storage._ranges import PUBLISH_EVERY, QUIET_SECONDS
from durable_streams_aws.core.storage._seal_plan import SealPolicy
from durable_streams_aws.core.storage.aws import Conflict

TEXT = "text/plain"
VOID_AFTER = 0.4

pytestmark = pytest.mark.both_dynamodbs


def plain(data: bytes, close: bool = False, seq: str | None = None) -> tuple[AppendIntent, Payload]:
    return AppendIntent(TEXT, bool(data), close, stream_seq=seq), Payload(data)


def produced(producer: str, seq: int, data: bytes) -> tuple[AppendIntent, Payload]:
    claim = ProducerClaim(producer, 0, seq)
    return AppendIntent(TEXT, True, False, producer=claim), Payload(data)


def read_all(store: DynamoStore, path: str) -> bytes:
    info = store.get(path)
    assert info is not None
    data, position = bytearray(), 0
    while position < info.tail:
        batch = store.read(info, position, 1 << 20)
        assert batch.end > position, f"the read stopped at {position} of {info.tail}"
        data += batch.data
        position = batch.end
    return bytes(data)


def read_placed(store: DynamoStore, path: str) -> bytes:
    """Everything readable, each byte at its offset (a voided range, which holds nothing,
    as zero bytes): what an acknowledged offset points at."""
    info = store.get(path)
    assert info is not None
    data, position = bytearray(info.tail), 0
    while position < info.tail:
        batch = store.read(info, position, 1 << 20)
        assert batch.end > position, f"the read stopped at {position} of {info.tail}"
        data[batch.start : batch.end] = batch.data
        position = batch.end
    return bytes(data)


def instances(backend: Backend, count: int) -> list[DynamoStore]:
    return [store_on(backend, void_after=VOID_AFTER) for _ in range(count)]


def hammer(stores: list[DynamoStore], path: str, appends: int, producers: bool) -> list[Any]:
    """Every store appends `appends` records from its own thread at once; the answers."""
    answers: list[Any] = []
    lock = threading.Lock()

    def write(index: int, store: DynamoStore) -> None:
        for seq in range(appends):
            record = f"w{index:02d}-{seq:04d};".encode()
            request = produced(f"p{index}", seq, record) if producers else plain(record)
            outcome = store.append(path, *request)
            with lock:
                answers.append((record, outcome))

    threads = [threading.Thread(target=write, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


@pytest.mark.parametrize("producers", [False, True])
def test_writers_on_many_instances_append_each_record_once_at_its_offset(
    backend: Backend, producers: bool
) -> None:
    stores = instances(backend, 8)
    stores[0].create("hot", CreateSpec(TEXT))
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    answers = hammer(stores, "hot", 25, producers)
    data = read_placed(stores[0], "hot")  # a slow writer's range may have been voided
    records = data.replace(b"\0", b"").split(b";")[:-1]
    assert len(records) == len(set(records)) == 8 * 25, "a record is missing or doubled"
    for record, outcome in answers:
        assert outcome.decision.verdict is Verdict.COMMIT
        end = outcome.info.tail
        assert data[end - len(record) : end] == record, "acknowledged at another offset"
    if producers:  # each producer's records in the order of its seqs
        for index in range(8):
            mine = [r for r in records if r.startswith(f"w{index:02d}".encode())]
            assert mine == sorted(mine)
    # Racing writers would spend many calls per append; reserved ranges spend two.
    calls = sum(n for op, n in meter.calls.items())
    assert calls / len(answers) < 3.5, dict(meter.calls)
    assert meter.calls["UpdateItem"] > len(answers) / 2, "the writers never reserved"


def _reserve_and_die(store: DynamoStore, path: str, data: bytes) -> tuple[Any, int, int]:
    """A writer that reserved a range and stopped before it filled it."""
    info = store.get(path)
    assert info is not None
    reserved = store.appender._reserve(info, len(data))
    return reserved, reserved.reserved_end - len(data), reserved.ranges


def test_a_range_whose_writer_died_holds_readers_until_it_is_voided(backend: Backend) -> None:
    writer, other, reader = instances(backend, 3)
    writer.create("s", CreateSpec(TEXT, payload=Payload(b"first;")))
    reserved, start, number = _reserve_and_die(writer, "s", b"lost;")
    other.recent.mark_hot("s")
    after = other.append("s", *plain(b"after;"))
    assert after.decision.verdict is Verdict.COMMIT
    # The range below the later append is pending: readers stop before it.
    seen = reader.get("s")
    assert seen is not None and seen.tail == start
    assert read_all(reader, "s") == b"first;"
    time.sleep(VOID_AFTER + 0.1)
    seen = reader.get("s")
    assert seen is not None and seen.tail == after.info.tail  # voided: readable past it
    assert read_all(reader, "s") == b"first;after;"
    # The dead writer wakes up and fills: its claim finds the range voided.
    with pytest.raises(Conflict):
        writer.appender._fill(
            reserved, start, Payload(b"lost;"), _body(writer, reserved), number, plain(b"lost;")[0]
        )
    assert read_all(reader, "s") == b"first;after;"
    # Once the stream is quiet, a reader publishes the tail: the next one needs no look at
    # the items above it.
    time.sleep(QUIET_SECONDS)
    reader.get("s")
    stored = reader.snapshot("s")
    assert stored is not None and stored.published_tail == after.info.tail


def _body(store: DynamoStore, info: Any) -> Any:
    return store.chunks.body_for(info.incarnation, Payload(b"lost;"), None)


def test_dead_ranges_behind_one_another_are_voided_together(backend: Backend) -> None:
    """Two writers died between reserving and filling, with a live writer's ranges between and
    after theirs: a reader that saw both gaps voids both once the bound has passed since it
    first saw them, not one bound after the other (security review 3, F5: k dead ranges held
    readers k times the bound). The stores' clock is moved by hand; the reads are over HTTP."""
    now = [time.time()]

    def clock() -> float:
        return now[0]

    writer, live, reader = (store_on(backend, void_after=VOID_AFTER, clock=clock) for _ in "wlr")
    writer.create("s", CreateSpec(TEXT, payload=Payload(b"first;")))
    live.recent.mark_hot("s")
    _reserve_and_die(writer, "s", b"lost-1;")
    assert live.append("s", *plain(b"two;")).decision.verdict is Verdict.COMMIT
    _reserve_and_die(writer, "s", b"lost-2;")
    assert live.append("s", *plain(b"four;")).decision.verdict is Verdict.COMMIT
    with TestClient(create_app(backend.settings, reader)) as client:
        url = "/v1/stream/s"
        seen = client.head(url).headers["stream-next-offset"]
        assert seen == format_offset(len(b"first;"))  # both gaps seen, neither due yet
        now[0] += VOID_AFTER / 2
        live.append("s", *plain(b"five;"))  # the stream stays busy: writers keep reserving
        now[0] += VOID_AFTER / 2 + 0.01
        last = live.append("s", *plain(b"six;"))
        assert last.info is not None
        tail = client.head(url).headers["stream-next-offset"]  # both voided by its one look
        assert tail == format_offset(last.info.tail)
        data, offset = b"", "-1"
        while offset != tail:  # a response ends where a void begins; the next passes over it
            read = client.get(url, params={"offset": offset})
            assert read.status_code == 200
            data, offset = data + read.content, read.headers["stream-next-offset"]
        assert data == b"first;two;four;five;six;"


def test_a_close_comes_after_every_acknowledged_append_and_before_none(backend: Backend) -> None:
    stores = instances(backend, 4)
    stores[0].create("c", CreateSpec(TEXT))
    results: list[Any] = []
    closed = threading.Event()

    def write(store: DynamoStore, index: int) -> None:
        store.recent.mark_hot("c")
        seq = 0
        while not closed.is_set() and seq < 200:
            outcome = store.append("c", *plain(f"{index}-{seq};".encode()))
            results.append((time.monotonic(), outcome))
            seq += 1

    threads = [threading.Thread(target=write, args=(s, i)) for i, s in enumerate(stores[1:])]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    asked = time.monotonic()
    close = stores[0].append("c", *plain(b"", close=True))
    closed_at = time.monotonic()
    print(f"\nthe close took {1000 * (closed_at - asked):.0f} ms among 3 busy writers")
    time.sleep(0.2)  # the writers go on, and meet the closed stream
    closed.set()
    for thread in threads:
        thread.join(30)
    assert close.decision.verdict is Verdict.COMMIT
    final = close.info.tail
    committed = [o for _, o in results if o.decision.verdict is Verdict.COMMIT]
    refused = [o for _, o in results if o.decision.verdict is Verdict.CLOSED]
    assert committed and refused, "the close should meet appends in flight"
    assert all(o.info.tail <= final for o in committed), "acknowledged past the close"
    late = [t for t, o in results if o.decision.verdict is Verdict.COMMIT and t > closed_at]
    assert not late, "an append was acknowledged after the close was"
    data = read_all(stores[0], "c")
    assert len(data) <= final and data.count(b";") == len(committed)
    info = stores[0].get("c")
    assert info is not None and info.closed and info.tail == final


def test_stream_seq_and_pending_ranges(backend: Backend) -> None:
    """A Stream-Seq append commits directly, after what is pending below has settled."""
    writer, other = instances(backend, 2)
    writer.create("q", CreateSpec(TEXT))
    _reserve_and_die(writer, "q", b"gone;")
    first = other.append("q", *plain(b"one;", seq="0001"))
    assert first.decision.verdict is Verdict.COMMIT  # waited out the dead range, voided it
    regress = other.append("q", *plain(b"two;", seq="0001"))
    assert regress.decision.verdict is Verdict.STREAM_SEQ_REGRESSION
    assert read_all(other, "q") == b"one;"


def test_a_producers_requests_that_reserved_out_of_order_keep_their_order(
    backend: Backend,
) -> None:
    """Seq 1 reaches one instance before seq 0 reaches another: seq 1 waits for seq 0, and
    the stream holds them in seq order, each once."""
    first, second = instances(backend, 2)
    first.create("p", CreateSpec(TEXT))
    for store in (first, second):
        store.recent.mark_hot("p")
    answers: dict[int, Any] = {}
    later = threading.Thread(
        target=lambda: answers.update({1: second.append("p", *produced("x", 1, b"B;"))})
    )
    later.start()
    time.sleep(0.15)
    answers[0] = first.append("p", *produced("x", 0, b"A;"))
    later.join(10)
    assert answers[0].decision.verdict is Verdict.COMMIT
    assert answers[1].decision.verdict is Verdict.COMMIT
    assert read_all(first, "p") == b"A;B;"
    again = second.append("p", *produced("x", 1, b"B;"))
    assert again.decision.verdict is Verdict.DUPLICATE
    assert read_all(first, "p") == b"A;B;"


def test_forks_and_the_sealer_see_voids_as_nothing(backend: Backend) -> None:
    writer, other = instances(backend, 2)
    writer.create("f", CreateSpec(TEXT, payload=Payload(b"a" * 100)))
    _reserve_and_die(writer, "f", b"x" * 50)
    other.recent.mark_hot("f")
    assert other.append("f", *plain(b"b" * 100)).decision.verdict is Verdict.COMMIT
    time.sleep(VOID_AFTER + 0.1)
    tail = other.get("f").tail  # type: ignore[union-attr]
    fork = other.create("f2", CreateSpec(None, fork=ForkRequest("f", None)))
    assert fork.info is not None and fork.info.tail == tail
    assert other.append("f2", *plain(b"c" * 10)).decision.verdict is Verdict.COMMIT
    assert read_all(other, "f2") == b"a" * 100 + b"b" * 100 + b"c" * 10
    assert other.append("f", *plain(b"", close=True)).decision.verdict is Verdict.COMMIT
    report = Sealer(other, SealPolicy(segment_bytes=64, hot_bytes=0, page_bytes=64)).seal("f")
    assert report.segments_written >= 2
    assert read_all(other, "f") == b"a" * 100 + b"b" * 100
    assert read_all(other, "f2") == b"a" * 100 + b"b" * 100 + b"c" * 10
    # The void stays, between the segments, and the claims beside the chunks.
    partition = items.chunk_partition(other.get("f").incarnation)  # type: ignore[union-attr]
    found = backend.dynamodb.query(
        TableName=backend.settings.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": partition}},
    )["Items"]
    assert any(item.get("v", {}).get("BOOL") for item in found if item["sk"]["S"].startswith("c#"))


def test_one_writer_still_commits_in_one_call(backend: Backend) -> None:
    store = store_on(backend)
    store.create("one", CreateSpec(TEXT))
    store.append("one", *plain(b"warm;"))
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    for index in range(20):
        assert store.append("one", *plain(f"{index};".encode())).decision.verdict is Verdict.COMMIT
    assert dict(meter.calls) == {"TransactWriteItems": 20}


def test_the_fills_producer_condition_is_fill_accepts(backend: Backend) -> None:
    """The model of the append path (tests/unit/test_append_model.py) decides with
    `fill_accepts`; the store writes it as a DynamoDB condition. Both agree on every state."""
    import random

    from durable_streams_aws.core.protocol.producer import ProducerState
    from durable_streams_aws.core.storage._ranges import fill_accepts

    store = store_on(backend)
    store.create("cond", CreateSpec(TEXT))
    info = store.get("cond")
    assert info is not None
    rng = random.Random(7)
    table = backend.settings.table
    key = items.producer_key("cond", "p")
    for _ in range(150):
        stored = None
        if rng.random() < 0.8:
            stored = (rng.randint(0, 2), rng.randint(0, 3), rng.choice([None, 5, 10, 15]))
            # Mostly this incarnation's; else an older one's (as good as none) or a newer
            # one's (the stream was re-created while the fill was on its way: refused).
            incarnation = rng.choice([info.incarnation] * 8 + ["0" * 29, "f" * 29])
            item = {**key, "inc": {"S": incarnation}}
            item.update(ep={"N": str(stored[0])}, sq={"N": str(stored[1])})
            if stored[2] is not None:
                item["pe"] = {"N": str(stored[2])}
            backend.dynamodb.put_item(TableName=table, Item=item)
            if incarnation < info.incarnation:
                stored = None
            elif incarnation > info.incarnation:
                stored = (99, 99, None)  # nothing this request could follow
        else:
            backend.dynamodb.delete_item(TableName=table, Key=key)
        claim = ProducerClaim("p", rng.randint(0, 2), rng.randint(0, 4))
        start = rng.choice([0, 5, 10, 12])
        intent = AppendIntent(TEXT, True, False, producer=claim)
        put = store.appender._producer_expected(info, intent, start, start + 1)
        try:
            backend.dynamodb.transact_write_items(TransactItems=[{"Put": put}])
            accepted = True
        except backend.dynamodb.exceptions.TransactionCanceledException:
            accepted = False
        state = None if stored is None else ProducerState(stored[0], stored[1])
        expected = fill_accepts(state, None if stored is None else stored[2], claim, start)
        assert accepted is expected, (stored, claim, start)


def test_old_claims_of_published_ranges_are_forgotten_by_the_sealer(backend: Backend) -> None:
    from support import FakeClock

    from durable_streams_aws.core.storage.sealer import CLAIM_GRACE_SECONDS

    clock = FakeClock()
    stores = [store_on(backend, clock=clock, void_after=VOID_AFTER) for _ in range(2)]
    stores[0].create("g", CreateSpec(TEXT))
    for store in stores:
        store.recent.mark_hot("g")
    for index in range(12):
        assert stores[index % 2].append("g", *plain(b"r;")).decision.verdict is Verdict.COMMIT
    clock.now += QUIET_SECONDS  # a quiet stream: its reader publishes the tail
    info = stores[0].get("g")
    assert info is not None and info.published_tail == info.reserved_end

    def claims() -> int:
        return len(
            [
                i
                for i in backend.dynamodb.query(
                    TableName=backend.settings.table,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={
                        ":pk": {"S": items.claim_partition(info.incarnation)},
                    },
                )["Items"]
            ]
        )

    assert claims() == 12
    sealer = Sealer(stores[0])
    sealer.seal("g")
    assert claims() == 12  # too recent: a fill or void could still be in flight
    clock.now += CLAIM_GRACE_SECONDS + 1
    sealer.seal("g")
    assert claims() == 0
    assert read_all(stores[0], "g") == b"r;" * 12


def test_appends_waiting_in_one_process_commit_together(backend: Backend) -> None:
    """Threads of one process append to one stream at once: they commit in shared
    transactions (fewer than one call per append), each still answered with its own offset;
    an append the stream refuses (another content type) fails none of the others."""
    store = store_on(backend)
    store.create("g", CreateSpec(TEXT))
    store.append("g", *plain(b"warm;"))
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    answers: list[Any] = []
    lock = threading.Lock()
    start = threading.Barrier(24)

    def write(index: int) -> None:
        start.wait()
        for seq in range(10):
            record = f"t{index:02d}-{seq:02d};".encode()
            if index == 1 and seq == 5:
                outcome = store.append(
                    "g", AppendIntent("application/json", True, False), Payload(b"[1]")
                )
                with lock:
                    answers.append((None, outcome))
                continue
            request = produced(f"p{index}", seq, record) if index % 3 == 0 else plain(record)
            outcome = store.append("g", *request)
            with lock:
                answers.append((record, outcome))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    data = read_placed(store, "g")
    refused = [o for r, o in answers if r is None]
    assert [o.decision.verdict for o in refused] == [Verdict.CONTENT_TYPE_MISMATCH]
    for record, outcome in answers:
        if record is None:
            continue
        assert outcome.decision.verdict is Verdict.COMMIT
        end = outcome.info.tail
        assert data[end - len(record) : end] == record
    assert data.count(b";") == 1 + 24 * 10 - 1
    transactions = meter.calls["TransactWriteItems"]
    print(f"\n239 appends from 24 threads: {dict(meter.calls)}")
    assert transactions < 239 * 0.6, "the appends were not committed together"
    assert store.turns.active() == 0


def test_a_fill_landing_after_its_stream_was_deleted_is_collected_with_it(
    backend: Backend,
) -> None:
    """A fill is not conditioned on the stream item (that would put the hot item in every
    transaction): one that lands after a delete writes into a retired incarnation, which the
    collector removes only after its grace, fill and all."""
    from support import FakeClock

    from durable_streams_aws.core.storage import Collector

    clock = FakeClock()
    store = store_on(backend, clock=clock, void_after=VOID_AFTER)
    store.create("d", CreateSpec(TEXT, payload=Payload(b"x;")))
    reserved, start, number = _reserve_and_die(store, "d", b"late;")
    incarnation = reserved.incarnation
    assert store.delete("d").value == "found"
    store.appender._fill(
        reserved, start, Payload(b"late;"), _body(store, reserved), number, plain(b"late;")[0]
    )

    def leftovers() -> int:
        return sum(
            len(
                backend.dynamodb.query(
                    TableName=backend.settings.table,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": {"S": partition}},
                )["Items"]
            )
            for partition in (
                items.chunk_partition(incarnation),
                items.claim_partition(incarnation),
            )
        )

    assert leftovers() == 3  # the created chunk, the late chunk and its claim
    collector = Collector(store, orphan_grace_seconds=60, clock=clock)
    assert collector.run().incarnations_removed == 0  # within the grace
    clock.now += 61
    assert collector.run().incarnations_removed == 1
    assert leftovers() == 0


def test_a_read_only_reader_settles_by_looking_only(backend: Backend) -> None:
    """A bulk job's store may only read (its role has no write grant): it finds where readable
    data ends, and neither voids nor publishes."""
    writer, other = instances(backend, 2)
    writer.create("ro", CreateSpec(TEXT, payload=Payload(b"a;")))
    _reserve_and_die(writer, "ro", b"gone;")
    other.recent.mark_hot("ro")
    other.append("ro", *plain(b"b;"))
    time.sleep(VOID_AFTER + 0.1)
    reader = store_on(backend, read_only=True, void_after=VOID_AFTER)
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    seen = reader.get("ro")
    assert seen is not None and seen.tail == 2  # stops at the pending range
    writes = {op for op in meter.calls if op not in {"GetItem", "Query", "BatchGetItem"}}
    assert writes == set(), dict(meter.calls)


def test_a_client_reads_at_the_offset_its_append_was_given(backend: Backend) -> None:
    """Its append's range is readable only once every range below it is: the read waits
    for them (here: a dead writer's, voided after the bound) instead of refusing an offset
    the server itself handed out."""
    from starlette.testclient import TestClient

    from durable_streams_aws.core.app import create_app

    writer = store_on(backend, void_after=VOID_AFTER)
    served = store_on(backend, void_after=VOID_AFTER)
    writer.create("own", CreateSpec(TEXT, payload=Payload(b"a;")))
    _reserve_and_die(writer, "own", b"dead;")
    served.recent.mark_hot("own")
    with TestClient(create_app(backend.settings, served)) as client:
        url = "/v1/stream/own"
        appended = client.post(url, content=b"mine;", headers={"Content-Type": TEXT})
        assert appended.status_code == 204
        offset = appended.headers["Stream-Next-Offset"]
        started = time.monotonic()
        read = client.get(url, params={"offset": offset})
        assert read.status_code == 200, read.text
        assert read.headers["Stream-Up-To-Date"] == "true" and read.content == b""
        assert time.monotonic() - started < VOID_AFTER + 1.5
        data, at = b"", "-1"
        while True:  # a response ends where a void range begins; the next passes over it
            answer = client.get(url, params={"offset": at})
            data, at = data + answer.content, answer.headers["Stream-Next-Offset"]
            if answer.headers.get("Stream-Up-To-Date") == "true":
                break
        assert data == b"a;mine;" and at == offset


def test_a_close_among_busy_writers_and_a_dead_range_commits(backend: Backend) -> None:
    """The close holds new ranges off, renewing its hold while a dead writer's range waits
    out the void bound, and commits well within the write deadline."""
    stores = instances(backend, 9)
    stores[0].create("busy", CreateSpec(TEXT))
    _reserve_and_die(stores[0], "busy", b"dead;")
    stop = threading.Event()

    def write(store: DynamoStore, index: int) -> None:
        store.recent.mark_hot("busy")
        seq = 0
        while not stop.is_set():
            outcome = store.append("busy", *plain(f"{index}-{seq};".encode()))
            if outcome.decision.verdict is Verdict.CLOSED:
                return
            seq += 1

    threads = [threading.Thread(target=write, args=(s, i)) for i, s in enumerate(stores[1:])]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    started = time.monotonic()
    close = stores[0].append("busy", *plain(b"", close=True))
    took = time.monotonic() - started
    stop.set()
    for thread in threads:
        thread.join(30)
    assert close.decision.verdict is Verdict.COMMIT
    assert took < 3 * VOID_AFTER + 2, f"the close took {took:.1f} s"
    info = stores[0].get("busy")
    assert info is not None and info.closed and info.tail == close.info.tail


def test_a_json_fork_counts_messages_across_a_void(backend: Backend) -> None:
    writer, other = instances(backend, 2)
    json_type = "application/json"
    writer.create("j", CreateSpec(json_type, payload=Payload(b'"a"', (3,))))
    _reserve_and_die(writer, "j", b'"dead-range"')
    other.recent.mark_hot("j")
    intent = AppendIntent(json_type, True, False)
    assert other.append("j", intent, Payload(b'"bb"', (4,))).decision.verdict is Verdict.COMMIT
    assert other.append("j", intent, Payload(b'"cc"', (4,))).decision.verdict is Verdict.COMMIT
    time.sleep(VOID_AFTER + 0.1)
    assert other.get("j") is not None
    forked = other.create("j2", CreateSpec(None, fork=ForkRequest("j", 0, sub_offset=2)))
    assert forked.info is not None
    messages, position = [], 0
    while position < forked.info.tail:
        read = other.read(forked.info, position, 1 << 20)
        messages += list(read.messages or ())
        position = read.end
    assert messages == [b'"a"', b'"bb"']
    # An offset right before a void is a message boundary a fork may start from.
    at_void = other.create("j3", CreateSpec(None, fork=ForkRequest("j", 3)))
    assert at_void.info is not None and at_void.info.fork_position == 3


def test_a_fill_whose_answer_is_lost_is_known_by_its_claim(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fill that landed but whose answer was lost is acknowledged (its claim says filled);
    one that never landed is voided at once and answered 503, and nothing is stored."""
    from durable_streams_aws.core.storage import StoreUnavailable

    store = store_on(backend, void_after=VOID_AFTER)
    store.create("lost", CreateSpec(TEXT))
    store.recent.mark_hot("lost")
    real_write = store.write
    mode = {"landed": True}

    def write(actions: list[dict[str, Any]]) -> None:
        claiming = any("k#" in str(a.get("Put", {}).get("Item", {}).get("pk")) for a in actions)
        fill = claiming and not any(
            a.get("Put", {}).get("Item", {}).get("v", {}).get("BOOL") for a in actions
        )
        if fill and mode["landed"]:
            real_write(actions)
        if fill:
            raise StoreUnavailable("the answer was lost")
        real_write(actions)

    monkeypatch.setattr(store, "write", write)
    landed = store.append("lost", *plain(b"landed;"))
    assert landed.decision.verdict is Verdict.COMMIT
    mode["landed"] = False
    with pytest.raises(StoreUnavailable):
        store.append("lost", *plain(b"never;"))
    info = store.get("lost")
    assert info is not None and info.tail == info.reserved_end  # voided at once
    assert read_all(store, "lost") == b"landed;"


def test_a_failed_publication_after_a_fill_does_not_fail_the_append(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    from durable_streams_aws.core.storage import StoreUnavailable

    store = store_on(backend)
    store.create("pub", CreateSpec(TEXT))
    store.recent.mark_hot("pub")

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("throttled")

    monkeypatch.setattr(store.settler, "settle", unavailable)
    for index in range(PUBLISH_EVERY + 2):  # a range's writer publishes now and then
        outcome = store.append("pub", *plain(f"{index};".encode()))
        assert outcome.decision.verdict is Verdict.COMMIT
