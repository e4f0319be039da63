"""What DynamoDB answers under contention and neither emulator does, injected
(`infra.dynamodb_faults`): transaction conflicts on 5% of item writes, with throttles, server
errors and writes applied whose answer was lost. Sixteen writers, each a store of its own as
Lambda instances are, on one stream; and the subscription paths. Nothing acknowledged may be
lost or doubled, no producer's record stored twice, and a conflict is never the client's
error: under 1% of appends may fail (503, after the store's retries)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from support import FakeClock, store_on
from test_hot_streams import plain, produced, read_placed
from test_subscription_service import SIGNING, Hook, Tasks

from durable_streams_aws.core.http.subscriptions import complete_wake
from durable_streams_aws.core.protocol.append import Verdict
from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, DynamoStore, StoreUnavailable
from durable_streams_aws.core.storage.aws import AwsSettings, make_clients, when_made
from durable_streams_aws.core.subscriptions import (
    Keys,
    SubscriptionError,
    Subscriptions,
    parse_config,
)
from durable_streams_aws.core.subscriptions._tokens import TokenSigner, derive_token_key
from durable_streams_aws.core.subscriptions.store import SubscriptionStore
from durable_streams_aws.core.subscriptions.wiring import StreamAccess
from durable_streams_aws.infra.dynamodb_faults import DynamoFaults, FaultRates

pytestmark = pytest.mark.both_dynamodbs

TEXT = "text/plain"
VOID_AFTER = 0.4
WRITERS = 16
APPENDS = 15
RATES = FaultRates(conflict=0.05, throttle=0.01, server_error=0.01, applied_then_server_error=0.01)


def faulty_stores(
    backend: Backend, count: int, seed: int, **options: Any
) -> tuple[list[DynamoStore], DynamoFaults]:
    """`count` stores on the backend's table and bucket, their DynamoDB answered with faults;
    `options` are DynamoStore's."""
    faults = DynamoFaults(RATES, seed=seed)
    settings = AwsSettings(
        region="us-east-1",
        dynamodb_endpoint=str(backend.dynamodb.meta.endpoint_url),
        s3_endpoint=str(backend.s3.meta.endpoint_url),
    )
    dynamodb, _ = make_clients(settings)
    when_made(dynamodb, faults.attach)
    stores = [
        DynamoStore(
            dynamodb,
            backend.s3,
            backend.settings.table,
            backend.settings.bucket,
            **{"void_after": VOID_AFTER, **options},
        )
        for _ in range(count)
    ]
    return stores, faults


@pytest.mark.parametrize("producers", [False, True], ids=["plain", "producers"])
def test_sixteen_writers_under_conflicts_and_faults_lose_and_double_nothing(
    backend: Backend, producers: bool
) -> None:
    stores, faults = faulty_stores(backend, WRITERS, seed=16 + producers)
    backend.store.create("contended", CreateSpec(TEXT))
    acknowledged: dict[bytes, int] = {}  # record -> the tail its append was answered with
    unacknowledged: set[bytes] = set()
    tries: Counter[str] = Counter()
    lock = threading.Lock()

    def write(index: int, store: DynamoStore) -> None:
        for seq in range(APPENDS):
            record = f"w{index:02d}-{seq:04d};".encode()
            request = produced(f"p{index}", seq, record) if producers else plain(record)
            # A producer retries a failed request with the same seq, as its client does; a
            # plain writer cannot know whether it landed, and does not.
            for _ in range(10 if producers else 1):
                with lock:
                    tries["appends"] += 1
                try:
                    outcome = store.append("contended", *request)
                except StoreUnavailable:
                    with lock:
                        tries["unavailable"] += 1
                    continue
                verdict = outcome.decision.verdict
                assert verdict in {Verdict.COMMIT, Verdict.DUPLICATE}, outcome.decision
                with lock:
                    acknowledged[record] = outcome.info.tail
                break
            else:
                with lock:
                    unacknowledged.add(record)

    threads = [threading.Thread(target=write, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)

    # Ranges whose reservation was applied twice (its answer lost) or whose writer gave up
    # stay pending until a reader voids them: once no range was reserved for the bound.
    # A reader voids a few gaps per look: look until the whole stream is readable.
    time.sleep(VOID_AFTER + 0.1)
    reader = store_on(backend, void_after=VOID_AFTER)
    for _ in range(100):
        info = reader.get("contended")
        if info is not None and info.tail == info.reserved_end:
            break
    data = read_placed(reader, "contended")
    records = Counter(data.replace(b"\0", b"").split(b";")[:-1])
    stored = {record + b";": count for record, count in records.items()}
    doubled = {record: count for record, count in stored.items() if count > 1}
    assert doubled == {}, "stored twice"
    for record, tail in acknowledged.items():
        assert stored.get(record) == 1, f"{record!r} was acknowledged and is not stored"
        assert data[tail - len(record) : tail] == record, "acknowledged at another offset"
    assert set(stored) <= set(acknowledged) | unacknowledged
    if producers:
        assert unacknowledged == set(), "a producer gave up"
        for index in range(WRITERS):
            mine = [r for r in records if r.startswith(f"w{index:02d}".encode())]
            assert mine == sorted(mine), "a producer's records out of order"
    assert tries["unavailable"] / tries["appends"] < 0.01, dict(tries)
    # Some 5% of ~450 item writes (the draws follow the threads' order, so vary run to run).
    assert faults.injected["conflict"] >= 5, dict(faults.injected)
    print(
        f"\nfaults injected: {dict(faults.injected)} over {faults.requests} requests; {dict(tries)}"
    )


def test_the_injected_answers_are_dynamodbs(backend: Backend) -> None:
    """What the store sees of each fault: a conflict is a lost race, the others outages."""
    from botocore.exceptions import ClientError

    from durable_streams_aws.core.storage.aws import is_condition_failure, is_unavailable

    def first_answer(rates: FaultRates, request: dict[str, Any], operation: str) -> ClientError:
        faults = DynamoFaults(rates, seed=1)
        settings = AwsSettings(
            region="us-east-1",
            dynamodb_endpoint=str(backend.dynamodb.meta.endpoint_url),
            max_attempts=1,
        )
        dynamodb, _ = make_clients(settings)
        when_made(dynamodb, faults.attach)
        with pytest.raises(ClientError) as raised:
            getattr(dynamodb, operation)(**request)
        return raised.value

    table = backend.settings.table
    item = {"pk": {"S": "x"}, "sk": {"S": "y"}}
    put = {"TableName": table, "Item": item}
    transaction = {
        "TransactItems": [
            {"Put": put},
            {
                "ConditionCheck": {
                    **put,
                    "Key": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
    }
    del transaction["TransactItems"][1]["ConditionCheck"]["Item"]
    conflict = first_answer(FaultRates(conflict=1.0), transaction, "transact_write_items")
    assert conflict.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = [r["Code"] for r in conflict.response["CancellationReasons"]]
    assert sorted(reasons) == ["None", "TransactionConflict"]
    assert is_condition_failure(conflict) and not is_unavailable(conflict)
    single = first_answer(FaultRates(conflict=1.0), put, "put_item")
    assert single.response["Error"]["Code"] == "TransactionConflictException"
    assert is_condition_failure(single)
    throttled = first_answer(FaultRates(throttle=1.0), put, "put_item")
    assert is_unavailable(throttled) and not is_condition_failure(throttled)
    lost = first_answer(FaultRates(applied_then_server_error=1.0), put, "put_item")
    assert is_unavailable(lost)
    assert backend.dynamodb.get_item(TableName=table, Key=item).get("Item") == item  # applied


def _retried(work: Callable[[], Any], attempts: int = 10) -> Any:
    """What a client does with a 503: the same request again."""
    for _ in range(attempts - 1):
        try:
            return work()
        except StoreUnavailable:
            continue
    return work()


def service_on(store: DynamoStore, clock: FakeClock) -> tuple[Subscriptions, Tasks]:
    tasks = Tasks(clock)
    keys = Keys(SIGNING, TokenSigner(derive_token_key(SIGNING.seed)))
    service = Subscriptions(
        SubscriptionStore(store.dynamodb, store.table),
        StreamAccess(store),
        lambda: keys,
        tasks,
        Hook(),
        clock=clock,
    )
    return service, tasks


def _acked(service: Subscriptions) -> dict[str, int]:
    _, statuses = _retried(lambda: service.describe("p"))
    return {status.link.path: status.acked for status in statuses}


def test_pull_wakes_under_conflicts_ack_every_byte_once(backend: Backend) -> None:
    """Two subscription instances and the writers of the streams they watch, all meeting the
    faults: every stream is woken, claimed and acked to its tail, and no cursor passes it."""
    clock = FakeClock(time.time())
    (writer, one_store, two_store), faults = faulty_stores(backend, 3, seed=5, clock=clock)
    one, two = (service_on(store, clock) for store in (one_store, two_store))
    backend.store.create("wake/pool", CreateSpec("application/json"))
    document = {"type": "pull-wake", "pattern": "jobs/*", "wake_stream": "wake/pool"}
    config = parse_config(json.dumps(document).encode(), allow_local_http=False)
    _retried(lambda: one[0].create("p", config, "http://test.local/v1/stream/"))
    tails: dict[str, int] = {}
    for index in range(6):
        path = f"jobs/{index}"
        _retried(lambda path=path: writer.create(path, CreateSpec(TEXT)))
        for seq in range(3):
            request = produced(f"job{index}", seq, f"{path}:{seq};".encode())
            outcome = _retried(lambda path=path, request=request: writer.append(path, *request))
            tails[path] = outcome.info.tail
        (one if index % 2 else two)[0].changed(path)

    def run_tasks() -> None:
        for _ in range(50):
            due = [(service, tasks, tasks.take()) for service, tasks in (one, two)]
            if not any(batch for _, _, batch in due):
                return
            for service, tasks, batch in due:
                for failed in service.run(batch):  # handed back, as SQS delivers it again
                    tasks.send(failed)
        raise AssertionError("the tasks never ran out")

    for _ in range(40):
        run_tasks()
        try:
            won = _retried(lambda: one[0].claim("p", "w"))
        except SubscriptionError as nothing:
            if nothing.code != "NO_PENDING_WORK":
                raise
            if _acked(one[0]) == tails:
                break
            clock.now += 31  # a lost wake is announced again after its lease
            continue
        wake = won.subscription.wake
        assert wake is not None
        acks = [{"stream": s.path, "offset": format_offset(s.tail)} for s in won.streams]
        body = {"wake_id": wake.wake_id, "generation": wake.generation, "acks": acks, "done": True}
        _retried(
            lambda won=won, body=body: complete_wake(
                two[0], "p", won.token, json.dumps(body).encode()
            )
        )
    assert _acked(one[0]) == tails
    assert faults.injected["conflict"] > 0, dict(faults.injected)
