"""Sealing against the emulator: history moves into S3 segments and every read stays the same,
for readers in this process and in another, during sealing and after it."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from sealing_support import (
    BYTES,
    JSON,
    Expected,
    append_units,
    check_everywhere,
    filled_stream,
    message,
    object_keys,
    partition_items,
    read_through,
)
from support import store_on

from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    Collector,
    CreateSpec,
    DynamoStore,
    ForkRequest,
    Payload,
    Presence,
    Sealer,
    SealPolicy,
)
from durable_streams_aws.core.storage import _items as items

SMALL = SealPolicy(segment_bytes=3000, hot_bytes=0, page_bytes=400)

pytestmark = pytest.mark.both_dynamodbs


def instance(backend: Backend, **options: Any) -> DynamoStore:
    """Another server instance on the same table and bucket, with a memory of its own."""
    return store_on(backend, **{"inline_max_bytes": backend.settings.inline_max_bytes, **options})


@pytest.mark.parametrize("delete_threads", [8, 1], ids=["parallel deletes", "one delete at a time"])
@pytest.mark.parametrize("content_type", [JSON, BYTES])
def test_a_sealed_stream_reads_the_same_from_every_offset_at_every_budget(
    backend: Backend, content_type: str, delete_threads: int
) -> None:
    store = instance(backend)
    expected = filled_stream(store, "s", content_type, appends=80)
    check_everywhere(store, "s", expected)
    report = Sealer(store, SMALL, delete_threads=delete_threads).seal("s")
    assert report.segments_written >= 2 and report.races_lost == 0
    info = store.get("s")
    assert info is not None and info.tail == expected.tail
    check_everywhere(store, "s", expected)
    check_everywhere(instance(backend), "s", expected)  # a reader that never saw it sealed
    kinds = [("pg" in item) for item in partition_items(backend, info.incarnation)]
    assert kinds == [True] * report.segments_written  # nothing but segments is left


def test_reads_of_sealed_history_ask_s3_for_ranges_never_whole_objects(backend: Backend) -> None:
    store = instance(backend)
    expected = filled_stream(store, "s", JSON, appends=150)
    Sealer(store, SealPolicy(segment_bytes=20_000, hot_bytes=0, page_bytes=1000)).seal("s")
    reader = instance(backend)
    requests: list[dict[str, Any]] = []
    reader.s3.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: requests.append(params)
    )
    for budget in (1, 500, 4000):
        read_through(reader, "s", expected, 0, budget)
    assert requests and all("Range" in params for params in requests)


def test_a_catch_up_read_costs_one_ranged_get_per_response(backend: Backend) -> None:
    store = instance(backend)
    expected = filled_stream(store, "s", JSON, appends=300)
    policy = SealPolicy(segment_bytes=16_000, hot_bytes=0, page_bytes=1000)
    Sealer(store, policy).seal("s")
    reader = instance(backend)
    calls: list[str] = []
    for client in (reader.dynamodb, reader.s3):
        client.meta.events.register("before-call", lambda model, **_: calls.append(model.name))
    # The server's default: one page per response (DS_SEAL_PAGE_BYTES unset).
    responses = read_through(reader, "s", expected, 0, policy.page_bytes + 64)
    assert calls.count("GetObject") == responses, calls
    assert calls.count("Query") <= 2  # the segments are learnt once, not per response


def test_a_fork_reads_its_sources_sealed_history_and_outlives_it(backend: Backend) -> None:
    store = instance(backend)
    source = filled_stream(store, "src", JSON, appends=80)
    Sealer(store, SMALL).seal("src")
    cut = source.boundaries()[100]
    fork_request = ForkRequest("src", anchor=cut)
    assert store.create("fork", CreateSpec(None, fork=fork_request)).info is not None
    fork = Expected(JSON, list(source.units[:100]))
    rng = random.Random(3)
    for serial in range(40):
        append_units(store, "fork", fork, [message(rng, 10_000 + serial)])
    sealer = Sealer(store, SMALL)
    sealer.seal("fork")
    check_everywhere(store, "fork", fork)
    assert store.delete("src") is Presence.FOUND  # soft-deleted: the fork still reads it
    Collector(store, orphan_grace_seconds=0).run()
    check_everywhere(instance(backend), "fork", fork)
    assert store.delete("fork") is Presence.FOUND  # and now the source goes with it
    Collector(store, orphan_grace_seconds=0).run()
    leftovers = [i for i in _scan(backend) if not i["pk"]["S"].startswith(items.SEAL_PREFIX)]
    assert leftovers == [] and object_keys(backend) == set()


def test_growing_a_short_segment_leaves_a_stale_reader_right(backend: Backend) -> None:
    """Another instance learnt the old, short segment; the sealer grows it into a new one and
    the collector removes the old object. That reader's next read finds the object gone
    and reads again: same bytes."""
    store = instance(backend)
    expected = filled_stream(store, "s", JSON, appends=30)
    policy = SealPolicy(segment_bytes=50_000, hot_bytes=0, page_bytes=500)
    Sealer(store, policy).seal("s")
    reader = instance(backend)
    read_through(reader, "s", expected, 0, 1 << 20)  # learns the segment
    old_objects = object_keys(backend)
    append_units(store, "s", expected, [b'{"more":true}'] * 5)
    Sealer(store, policy).seal("s")  # short: sealed again together with the new chunks
    Collector(store, orphan_grace_seconds=0).run()
    assert not old_objects & object_keys(backend), "the old segment object is gone"
    for budget in (1, 300, 1 << 20):
        read_through(reader, "s", expected, 0, budget)


def test_concurrent_readers_always_get_the_right_bytes_while_sealing_and_collecting(
    backend: Backend,
) -> None:
    """A writer appends, readers in another instance read from random offsets at random
    budgets, a sealer seals (growing short segments, so objects are replaced) and the
    collector removes replaced objects with no grace, all at once."""
    writer, reader_store, sealing = instance(backend), instance(backend), instance(backend)
    rng = random.Random(5)
    expected = Expected(JSON)
    writer.create("s", CreateSpec(JSON))
    planned = [message(rng, serial) for serial in range(600)]
    done = threading.Event()
    failures: list[BaseException] = []
    report_lock = threading.Lock()
    reads = 0
    segments = 0

    def write() -> None:
        position = 0
        while position < len(planned):
            count = rng.randint(1, 5)
            append_units(writer, "s", expected, planned[position : position + count])
            position += count
            time.sleep(0.002)

    def read(seed: int) -> None:
        nonlocal reads
        local = random.Random(seed)
        whole = Expected(JSON, planned)  # positions do not depend on how appends batch
        bounds = whole.boundaries()
        while not done.is_set():
            info = reader_store.get("s")
            assert info is not None
            starts = [b for b in bounds if b < info.tail]
            if not starts:
                continue
            start = local.choice(starts)
            batch = reader_store.read(info, start, local.choice([1, 200, 2000, 1 << 20]))
            whole.check(batch, start)
            with report_lock:
                reads += 1

    def seal() -> None:
        nonlocal segments
        policy = SealPolicy(segment_bytes=4000, hot_bytes=0, page_bytes=300)
        while not done.is_set():
            segments += Sealer(sealing, policy).seal("s").segments_written
            Collector(sealing, orphan_grace_seconds=0).run()

    def guarded(target: Any, *args: Any) -> Any:
        def run() -> None:
            try:
                target(*args)
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)
                done.set()

        return threading.Thread(target=run)

    threads = [guarded(read, seed) for seed in range(3)] + [guarded(seal)]
    for thread in threads:
        thread.start()
    try:
        write()
    finally:
        Sealer(sealing, SMALL).seal("s")
        time.sleep(0.2)
        done.set()
        for thread in threads:
            thread.join(timeout=60)
    if failures:
        raise failures[0]
    assert reads > 50 and segments > 5, (reads, segments)
    check_everywhere(reader_store, "s", expected)


def test_commits_mark_streams_and_the_sealer_clears_only_marks_it_served(
    backend: Backend,
) -> None:
    store = instance(backend, seal_mark_bytes=500)
    sealer = Sealer(store, SealPolicy(segment_bytes=3000, hot_bytes=500, page_bytes=400))
    expected = filled_stream(store, "quiet", JSON, appends=2)  # under one quantum: no mark
    assert _marks(backend) == {}
    busy = filled_stream(store, "busy", JSON, appends=60)
    assert set(_marks(backend)) == {"busy"}
    store.append("quiet", AppendIntent(JSON, False, True), Payload())  # a close marks
    assert set(_marks(backend)) == {"busy", "quiet"}
    report = sealer.run()
    assert report.streams_examined == 2 and report.segments_written >= 2
    assert _marks(backend) == {}
    check_everywhere(store, "quiet", expected)
    check_everywhere(store, "busy", busy)
    quiet = store.get("quiet")
    assert quiet is not None and quiet.sealed == quiet.tail  # a closed stream is sealed whole
    busy_info = store.get("busy")
    assert busy_info is not None and busy_info.tail - busy_info.sealed <= 2 * 500

    # A commit that marks the stream again while the sealer works keeps its mark.
    append_units(store, "busy", busy, [b'{"x":"%s"}' % (b"y" * 600)])
    stale = _marks(backend)["busy"]
    append_units(store, "busy", busy, [b'{"x":"%s"}' % (b"z" * 600)])
    sealer._clear(stale)
    assert set(_marks(backend)) == {"busy"}
    assert sealer.run().streams_examined == 1 and _marks(backend) == {}


def test_marks_of_deleted_or_recreated_streams_are_dropped(backend: Backend) -> None:
    store = instance(backend, seal_mark_bytes=100)
    filled_stream(store, "s", JSON, appends=20)
    assert set(_marks(backend)) == {"s"}
    store.delete("s")
    store.create("s", CreateSpec(JSON))
    report = Sealer(store, SMALL).run()
    assert report.streams_examined == 0 and _marks(backend) == {}


def test_run_all_seals_streams_written_before_marks_existed(backend: Backend) -> None:
    unmarked = instance(backend, seal_mark_bytes=1 << 40)
    expected = filled_stream(unmarked, "old", BYTES, appends=50)
    assert _marks(backend) == {}
    assert Sealer(unmarked, SMALL).run().streams_examined == 0
    report = Sealer(unmarked, SMALL).run_all()
    assert report.streams_examined == 1 and report.segments_written >= 1
    check_everywhere(unmarked, "old", expected)
    assert Sealer(unmarked, SMALL).run_all().streams_examined == 0  # its frontier is recorded


def test_an_expired_stream_is_left_to_the_reaper(backend: Backend) -> None:
    store = instance(backend)
    store.create("s", CreateSpec(BYTES, expires_at=time.time() + 0.5, payload=Payload(b"x" * 99)))
    time.sleep(0.6)
    assert Sealer(store, SMALL).seal("s").segments_written == 0


def _marks(backend: Backend) -> dict[str, dict[str, Any]]:
    return {
        item["path"]["S"]: item
        for item in _scan(backend)
        if item["pk"]["S"].startswith(items.SEAL_PREFIX)
    }


def _scan(backend: Backend) -> list[dict[str, Any]]:
    response = backend.dynamodb.scan(TableName=backend.settings.table, ConsistentRead=True)
    return list(response["Items"])


def test_a_stream_that_cannot_be_sealed_holds_up_no_other(backend: Backend) -> None:
    store = instance(backend, seal_mark_bytes=0, inline_max_bytes=8)  # bodies go to S3
    broken = filled_stream(store, "broken", BYTES, appends=5)
    fine = filled_stream(store, "fine", BYTES, appends=5)
    info = store.get("broken")
    assert info is not None and broken.tail == info.tail
    for key in object_keys(backend):
        if key.startswith(f"data/{info.incarnation}/"):
            backend.s3.delete_object(Bucket=backend.settings.bucket, Key=key)
    report = Sealer(store, SMALL).run()
    assert report.streams_failed == 1 and report.segments_written >= 1
    assert set(_marks(backend)) == {"broken"}  # kept for the next run
    check_everywhere(instance(backend), "fine", fine)


def test_split_points_of_a_sealed_text_stream_fall_where_appends_ended(backend: Backend) -> None:
    """Pages of streams that are not JSON are cut at a byte count, which may fall inside a
    UTF-8 character: a bulk job must never split there (JSON pages end between messages)."""
    store = instance(backend)
    store.create("t", CreateSpec("text/plain"))
    expected = Expected("text/plain")
    for n in range(30):
        append_units(store, "t", expected, [("é" * (n % 7 + 1) + "|").encode()])
    Sealer(store, SealPolicy(segment_bytes=150, hot_bytes=0, page_bytes=16)).seal("t")
    info = store.get("t")
    assert info is not None
    splits = set(store.boundaries(info, 0, info.tail))
    assert splits and splits <= set(expected.boundaries())
    json_store = instance(backend)
    json_expected = filled_stream(json_store, "j", JSON, appends=30)
    Sealer(json_store, SealPolicy(segment_bytes=3000, hot_bytes=0, page_bytes=200)).seal("j")
    json_info = json_store.get("j")
    assert json_info is not None
    json_splits = set(json_store.boundaries(json_info, 0, json_info.tail))
    assert json_splits <= set(json_expected.boundaries())
    assert len(json_splits) > 3 * len(partition_items(backend, json_info.incarnation))  # pages


def test_with_a_page_limit_every_query_of_the_sealer_reads_at_most_that_many_items(
    backend: Backend,
) -> None:
    """On the embedded emulator (`dsaws serve`) each call of the sealer is a step requests may
    wait for, so its Queries read pages of `page_items` chunks, not DynamoDB's 1 MB: counted
    here, and the stream seals and reads the same."""
    store = instance(backend)
    expected = filled_stream(store, "s", BYTES, appends=120)
    pages: list[int] = []

    def count(parsed: dict[str, Any], **_: Any) -> None:
        pages.append(len(parsed.get("Items", [])))

    store.dynamodb.meta.events.register("after-call.dynamodb.Query", count)
    try:
        report = Sealer(store, SMALL, delete_threads=1, page_items=7).seal("s")
    finally:
        store.dynamodb.meta.events.unregister("after-call.dynamodb.Query", count)
    assert report.segments_written >= 2 and report.races_lost == 0
    assert max(pages) == 7 and len(pages) > 120 / 7  # every chunk listed, a page at a time
    check_everywhere(store, "s", expected)
    check_everywhere(instance(backend), "s", expected)
