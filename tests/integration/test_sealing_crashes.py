"""A sealer that dies at each step of sealing: the stream reads the same at once, and a later
run and the collector finish the job, leaving exactly the segments and nothing else."""

from __future__ import annotations

import itertools

import pytest
from sealing_support import (
    JSON,
    Crash,
    CrashingClient,
    Expected,
    append_units,
    check_everywhere,
    filled_stream,
    object_keys,
    partition_items,
)
from support import store_on

from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    Collector,
    CreateSpec,
    CreateStatus,
    DynamoStore,
    ForkRequest,
    Sealer,
    SealPolicy,
    SealReport,
)
from durable_streams_aws.core.storage import _items as items
from durable_streams_aws.core.storage._seal_plan import plan

POLICY = SealPolicy(segment_bytes=4000, hot_bytes=0, page_bytes=500)

pytestmark = pytest.mark.both_dynamodbs


def crashing_store(backend: Backend, client: str, operation: str, nth: int) -> DynamoStore:
    dynamodb, s3 = backend.dynamodb, backend.s3
    if client == "dynamodb":
        dynamodb = CrashingClient(dynamodb, operation, nth)
    else:
        s3 = CrashingClient(s3, operation, nth)
    return DynamoStore(dynamodb, s3, backend.settings.table, backend.settings.bucket)


def finish_and_check(backend: Backend, expected: Expected) -> None:
    """Whatever the crash left, the stream reads right now; a normal run and the collector
    then leave only segment items, each naming an object that exists, and no other object."""
    check_everywhere(store_on(backend), "s", expected)  # a reader that never met the stream
    store = store_on(backend)
    Sealer(store, POLICY).seal("s")
    Collector(store, orphan_grace_seconds=0).run()
    info = store.get("s")
    assert info is not None
    stored = partition_items(backend, info.incarnation)
    assert stored and all("pg" in item for item in stored), "only segments are left"
    spans = sorted((int(i["st"]["N"]), int(i["sk"]["S"][2:])) for i in stored)
    assert spans[0][0] == 0 and spans[-1][1] == info.tail
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans)), "no overlaps"
    assert {item["k"]["S"] for item in stored} == object_keys(backend)
    check_everywhere(store_on(backend), "s", expected)


CRASH_POINTS = [
    # (client, operation, nth call): the step the sealer dies at
    pytest.param("s3", "put_object", 1, id="before-the-segment-object"),
    pytest.param("dynamodb", "put_item", 1, id="object-written-segment-not-recorded"),
    pytest.param("dynamodb", "put_item", 2, id="second-segment-not-recorded"),
    pytest.param("dynamodb", "delete_item", 1, id="segment-recorded-nothing-deleted"),
    pytest.param("dynamodb", "delete_item", 9, id="halfway-through-deleting-chunks"),
    pytest.param("dynamodb", "update_item", 1, id="frontier-not-recorded"),
]


@pytest.mark.parametrize(("client", "operation", "nth"), CRASH_POINTS)
def test_a_crash_at_each_step_of_sealing(
    backend: Backend, client: str, operation: str, nth: int
) -> None:
    expected = filled_stream(store_on(backend), "s", JSON, appends=60)
    doomed = crashing_store(backend, client, operation, nth)
    with pytest.raises(Crash):
        Sealer(doomed, POLICY).seal("s")
    finish_and_check(backend, expected)


@pytest.mark.parametrize(
    ("operation", "nth"),
    [
        pytest.param("put_item", 1, id="grown-object-written-not-recorded"),
        pytest.param("delete_item", 1, id="grown-segment-recorded-old-one-kept"),
    ],
)
def test_a_crash_while_growing_a_short_segment(backend: Backend, operation: str, nth: int) -> None:
    store = store_on(backend)
    expected = filled_stream(store, "s", JSON, appends=10)
    Sealer(store, POLICY).seal("s")  # one short segment
    append_units(store, "s", expected, [b'{"late":%d}' % i for i in range(30)])
    doomed = crashing_store(backend, "dynamodb", operation, nth)
    with pytest.raises(Crash):
        Sealer(doomed, POLICY).seal("s")
    finish_and_check(backend, expected)


def test_sealers_with_stale_plans_interleaved_lose_nothing(backend: Backend) -> None:
    """Sealer A records one large segment and stops before deleting anything; sealer B,
    working from what it listed before A wrote, seals small segments and deletes what they
    cover; then A deletes. Each delete only takes an item that is still what its sealer
    listed, so A cannot remove B's segments nor B A's."""
    store = store_on(backend)
    expected = filled_stream(store, "s", JSON, appends=60)
    info = store.snapshot("s")
    assert info is not None
    large = Sealer(store, SealPolicy(segment_bytes=1 << 20, hot_bytes=0, page_bytes=500))
    small = Sealer(store_on(backend), POLICY)
    listed = list(large._stored(info.incarnation))
    run_a = plan(listed, 0, info.tail, False, large.policy).run
    run_b = plan(listed, 0, info.tail, False, small.policy).run
    with pytest.raises(Crash):  # A: the segment recorded, then it dies
        Sealer(crashing_store(backend, "dynamodb", "delete_item", 1), large.policy).seal("s")
    report = small._seal_run(info, run_b, SealReport())  # B: from its stale listing
    assert report < info.tail  # its last segment would replace what A already replaced
    large._delete(info.incarnation, run_a[:-1])  # A, late: refuses B's segments
    check_everywhere(store_on(backend), "s", expected)
    finish_and_check(backend, expected)


def test_a_fork_reads_its_source_while_only_chunks_past_the_fork_point_are_left(
    backend: Backend,
) -> None:
    """The source's segment covers the fork point; its chunks below the fork point are
    deleted, those above are not yet (deletes run in parallel, and a crash may stop them):
    the first item past the fork reader's position starts after the fork point, and the
    reader must go on to the segment rather than stop."""
    store = store_on(backend)
    source = filled_stream(store, "src", JSON, appends=40)
    cut = source.boundaries()[len(source.units) // 2]
    created = store.create("fork", CreateSpec(None, fork=ForkRequest("src", anchor=cut)))
    assert created.status is CreateStatus.CREATED
    with pytest.raises(Crash):  # the segment recorded, no chunk deleted
        Sealer(crashing_store(backend, "dynamodb", "delete_item", 1), POLICY).seal("src")
    info = store.snapshot("src")
    assert info is not None
    for item in partition_items(backend, info.incarnation):
        if "pg" not in item and int(item["sk"]["S"][2:]) <= cut:
            backend.dynamodb.delete_item(
                TableName=backend.settings.table, Key={"pk": item["pk"], "sk": item["sk"]}
            )
    fork = Expected(JSON, source.units[: source.boundaries().index(cut)])
    check_everywhere(store_on(backend), "fork", fork)
    check_everywhere(store_on(backend), "src", source)


def test_a_sealer_that_keeps_losing_races_keeps_the_mark(backend: Backend) -> None:
    store = store_on(backend, seal_mark_bytes=0)
    expected = filled_stream(store, "s", JSON, appends=30)
    info = store.snapshot("s")
    assert info is not None
    stale = Sealer(store_on(backend), POLICY)
    listed = list(stale._stored(info.incarnation))
    Sealer(store_on(backend), SealPolicy(segment_bytes=1 << 20, hot_bytes=0)).seal("s")
    stale._stored = lambda incarnation: iter(listed)  # type: ignore[method-assign]
    report = stale.run()
    assert report.races_lost >= 1 and report.streams_examined == 1
    marks = backend.dynamodb.query(
        TableName=backend.settings.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": items.s(items.seal_mark_key("s")["pk"]["S"])},
    )["Items"]
    assert len(marks) == 1, "the mark stays for a run that can see the stream as it is"
    check_everywhere(store_on(backend), "s", expected)
