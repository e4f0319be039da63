"""Forks, reference counts, soft delete, expiry, cascade and the collector, on the emulator.

Every test checks the invariant that matters: a live stream's `refs` equals the number of
stream items that name it (path and incarnation) as their source, and the collector never
removes anything a live stream or fork can still read.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
from storage_checks import assert_data_bound_to_incarnations
from support import FakeClock, endpoint_env, store_on

from durable_streams_aws.core.protocol.append import AppendIntent, Verdict
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    Collector,
    CreateSpec,
    CreateStatus,
    DynamoStore,
    ForkRequest,
    Payload,
    Presence,
)
from durable_streams_aws.core.storage import _items as items

TEXT = "text/plain"

pytestmark = pytest.mark.both_dynamodbs


def make_store(backend: Backend, clock: FakeClock | None = None) -> DynamoStore:
    # Most test bodies go to S3, so object cleanup is exercised.
    return store_on(backend, inline_max_bytes=8, **({"clock": clock} if clock else {}))


def create(store: DynamoStore, path: str, body: bytes = b"", **kwargs: Any) -> CreateStatus:
    spec = CreateSpec(kwargs.pop("content_type", TEXT), payload=Payload(body), **kwargs)
    return store.create(path, spec).status


def fork(store: DynamoStore, path: str, source: str, **kwargs: Any) -> CreateStatus:
    request = ForkRequest(source, kwargs.pop("anchor", None), kwargs.pop("sub_offset", 0))
    content_type = kwargs.pop("content_type", None)
    return store.create(path, CreateSpec(content_type, fork=request, **kwargs)).status


def read(store: DynamoStore, path: str) -> bytes:
    info = store.get(path)
    assert info is not None and not info.soft_deleted
    return store.read(info, 0, 1 << 20).data


def stream_items(backend: Backend) -> dict[str, dict[str, Any]]:
    response = backend.dynamodb.scan(TableName=backend.settings.table)
    return {
        item["pk"]["S"][2:]: item
        for item in response["Items"]
        if item["pk"]["S"].startswith("s#") and item["sk"]["S"] == items.META
    }


def assert_reference_counts_exact(backend: Backend) -> None:
    streams = stream_items(backend)
    for path, item in streams.items():
        referencing = [
            other
            for other in streams.values()
            if other.get("src", {}).get("S") == path
            and other.get("srci", {}).get("S") == item["inc"]["S"]
        ]
        assert int(item["refs"]["N"]) == len(referencing), f"refs of {path}"
        if item.get("del", {}).get("BOOL"):
            assert referencing, f"{path} is soft-deleted with no fork left"


def data_keys(backend: Backend) -> tuple[set[str], set[str]]:
    """Incarnations that still have chunk items, and S3 object keys."""
    response = backend.dynamodb.scan(TableName=backend.settings.table)
    partitions = {i["pk"]["S"][2:] for i in response["Items"] if i["pk"]["S"].startswith("d#")}
    listing = backend.s3.list_objects_v2(Bucket=backend.settings.bucket)
    return partitions, {o["Key"] for o in listing.get("Contents", [])}


def test_fork_stitches_reads_and_soft_delete_keeps_data(backend: Backend) -> None:
    store = make_store(backend)
    create(store, "src", b"source-data")
    assert fork(store, "fork", "src", anchor=6) is CreateStatus.CREATED
    store.append("fork", AppendIntent(TEXT, True, False), Payload(b"+own"))
    store.append("src", AppendIntent(TEXT, True, False), Payload(b"+later"))
    assert read(store, "fork") == b"source+own"
    assert store.delete("src") is Presence.FOUND
    assert store.get("src").soft_deleted  # type: ignore[union-attr]
    assert store.delete("src") is Presence.GONE
    assert create(store, "src") is CreateStatus.CONFLICT
    assert fork(store, "other", "src") is CreateStatus.SOURCE_GONE
    Collector(store, orphan_grace_seconds=0).run()
    assert read(store, "fork") == b"source+own"  # the collector left the source's data
    assert_reference_counts_exact(backend)
    # Deleting the last fork cascades to the soft-deleted source, and the collector then
    # removes every chunk and object of both.
    assert store.delete("fork") is Presence.FOUND
    assert store.get("src") is None
    assert_reference_counts_exact(backend)
    report = Collector(store, orphan_grace_seconds=0).run()
    assert report.incarnations_removed == 2
    assert data_keys(backend) == (set(), set())


def test_failed_fork_creations_leave_counts_unchanged(backend: Backend) -> None:
    store = make_store(backend)
    create(store, "src", b"abc")
    assert fork(store, "f1", "missing") is CreateStatus.SOURCE_NOT_FOUND
    assert fork(store, "f2", "src", anchor=99) is CreateStatus.OFFSET_BEYOND_TAIL
    assert fork(store, "f3", "src", anchor=0, sub_offset=4) is CreateStatus.SUB_OFFSET_OVERSHOOT
    assert fork(store, "f4", "src", content_type="application/json") is (
        CreateStatus.CONTENT_TYPE_MISMATCH
    )
    create(store, "taken", content_type="application/json")
    assert fork(store, "taken", "src") is CreateStatus.CONFLICT
    assert fork(store, "ok", "src", anchor=0, sub_offset=2) is CreateStatus.CREATED
    assert fork(store, "ok", "src", anchor=0, sub_offset=2) is CreateStatus.EXISTS
    assert fork(store, "ok", "src", anchor=0, sub_offset=3) is CreateStatus.CONFLICT
    assert_reference_counts_exact(backend)
    assert store.get("src").ref_count == 1  # type: ignore[union-attr]


def test_source_expiring_under_a_fork_is_soft_deleted_and_kept(backend: Backend) -> None:
    clock = FakeClock()
    store = make_store(backend, clock)
    create(store, "src", b"inherited", ttl_seconds=10)
    fork(store, "fork", "src", ttl_seconds=100)
    clock.now += 11
    expired = store.get("src")
    assert expired is not None and expired.soft_deleted
    assert create(store, "src") is CreateStatus.CONFLICT  # refused while forks read it
    Collector(store, orphan_grace_seconds=0, clock=clock).run()
    assert read(store, "fork") == b"inherited"
    clock.now += 100  # the fork expires too: the collector reaps it and cascades
    Collector(store, orphan_grace_seconds=0, clock=clock).run()
    assert stream_items(backend) == {}
    assert Collector(store, orphan_grace_seconds=0, clock=clock).run().incarnations_removed == 0
    assert data_keys(backend) == (set(), set())


def test_expired_fork_releases_its_reference(backend: Backend) -> None:
    clock = FakeClock()
    store = make_store(backend, clock)
    create(store, "src", b"x")
    fork(store, "fork", "src", ttl_seconds=5)
    clock.now += 6
    assert store.get("fork") is None  # reaped on sight
    assert store.get("src").ref_count == 0  # type: ignore[union-attr]
    assert store.delete("src") is Presence.FOUND
    assert store.get("src") is None  # a hard delete: nothing references it


def test_three_level_cascade(backend: Backend) -> None:
    store = make_store(backend)
    create(store, "l0", b"A")
    fork(store, "l1", "l0")
    store.append("l1", AppendIntent(TEXT, True, False), Payload(b"B"))
    fork(store, "l2", "l1")
    store.append("l2", AppendIntent(TEXT, True, False), Payload(b"C"))
    store.delete("l0")
    store.delete("l1")
    assert read(store, "l2") == b"ABC"
    assert store.delete("l2") is Presence.FOUND
    assert stream_items(backend) == {}
    Collector(store, orphan_grace_seconds=0).run()
    assert data_keys(backend) == (set(), set())


def test_orphaned_upload_is_removed_but_committed_objects_stay(backend: Backend) -> None:
    store = make_store(backend)
    create(store, "s", b"committed-object")
    info = store.get("s")
    assert info is not None
    orphan = f"data/{info.incarnation}/failed-commit"
    backend.s3.put_object(Bucket=backend.settings.bucket, Key=orphan, Body=b"never committed")
    # Within the grace period nothing is touched: the upload may still be committing.
    assert Collector(store).run().orphans_deleted == 0
    report = Collector(store, orphan_grace_seconds=0).run()
    assert report.orphans_deleted == 1
    assert read(store, "s") == b"committed-object"
    _, objects = data_keys(backend)
    assert orphan not in objects and len(objects) == 1


def race(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """Run two calls at the same moment from two threads; return both results."""
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]

    def run(index: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        results[index] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results[0], results[1]


def test_fork_creation_racing_source_deletion(backend: Backend) -> None:
    """Whichever commits first wins; the loser re-reads. Never a fork of a deleted source,
    never a source deleted under a fork, never a leaked or missing reference."""
    store = make_store(backend)
    for round_number in range(15):
        source, target = f"src{round_number}", f"fork{round_number}"
        create(store, source, b"data")
        forked, deleted = race(
            lambda s=source, t=target: fork(store, t, s), lambda s=source: store.delete(s)
        )
        assert deleted is Presence.FOUND
        if forked is CreateStatus.CREATED:
            assert store.get(source).soft_deleted  # type: ignore[union-attr]
            assert read(store, target) == b"data"
        else:
            assert forked in {CreateStatus.SOURCE_NOT_FOUND, CreateStatus.SOURCE_GONE}
            assert store.get(source) is None and store.get(target) is None
        assert_reference_counts_exact(backend)


def test_delete_racing_append_never_resurrects_the_stream(backend: Backend) -> None:
    store = make_store(backend)
    for round_number in range(15):
        path = f"race{round_number}"
        create(store, path)
        appended, deleted = race(
            lambda p=path: store.append(
                p, AppendIntent(TEXT, True, False), Payload(b"payload-bytes")
            ),
            lambda p=path: store.delete(p),
        )
        assert deleted is Presence.FOUND
        assert appended.presence is Presence.NOT_FOUND or (
            appended.decision.verdict is Verdict.COMMIT
        )
        assert store.get(path) is None, "an append must never recreate a deleted stream"
    Collector(store, orphan_grace_seconds=0).run()
    assert data_keys(backend) == (set(), set())


def test_random_lifecycles_keep_reference_counts_exact(backend: Backend) -> None:
    """Two instances (each with its own memory of what it last wrote, as two Lambda instances
    have) create, fork, delete, append and collect at random. After every step the reference
    counts are exact, every chunk's data lies under its own incarnation, and every live
    stream reads back to its tail, even right after the collector ran with no orphan grace."""
    clock = FakeClock()
    instances = [make_store(backend, clock), make_store(backend, clock)]
    rng = random.Random(11)
    paths = [f"p{i}" for i in range(6)]
    for _ in range(200):
        action = rng.choice(["create", "fork", "fork", "delete", "append", "tick", "gc"])
        path = rng.choice(paths)
        store = rng.choice(instances)
        if action == "create":
            create(store, path, b"seed", ttl_seconds=rng.choice([None, 30]))
        elif action == "fork":
            source = rng.choice(paths)
            if source != path:
                fork(store, path, source, ttl_seconds=rng.choice([None, 20]))
        elif action == "delete":
            store.delete(path)
        elif action == "append":
            store.append(path, AppendIntent(TEXT, True, False), Payload(b"more-bytes"))
        elif action == "tick":
            clock.now += rng.choice([1, 10, 25])
        else:
            Collector(store, orphan_grace_seconds=0, clock=clock).run()
        assert_reference_counts_exact(backend)
        assert_data_bound_to_incarnations(backend)
        for candidate in paths:
            info = store.get(candidate)
            if info is not None and not info.soft_deleted:
                data = store.read(info, 0, 1 << 20).data
                assert len(data) == info.tail  # every readable byte is still there


def test_dsaws_gc_command_collects_through_an_endpoint(backend: Backend, emulator) -> None:  # type: ignore[no-untyped-def]
    store = make_store(backend)
    create(store, "gone", b"some bytes to collect")
    store.delete("gone")
    env = {**os.environ, **endpoint_env(backend)}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "durable_streams_aws.core.cli",
            "gc",
            "--table",
            backend.settings.table,
            "--bucket",
            backend.settings.bucket,
            "--orphan-grace",
            "0",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["incarnations_removed"] == 1 and report["objects_deleted"] == 1
    assert "use it only when nothing is writing" in run.stderr  # a grace of 0 is risky
    assert data_keys(backend) == (set(), set())


def test_recreating_an_expired_fork_of_the_same_source(backend: Backend) -> None:
    """The expired fork releases its source and the new one references it: done in one
    transaction that was two operations on the source's item, which DynamoDB refuses (a
    500). The old stream is finished on its own first."""
    clock = FakeClock()
    store = make_store(backend, clock)
    create(store, "src", b"hello")
    assert fork(store, "f", "src", ttl_seconds=10) is CreateStatus.CREATED
    clock.now += 60
    assert fork(store, "f", "src", ttl_seconds=10) is CreateStatus.CREATED
    assert_reference_counts_exact(backend)
    assert read(store, "f") == b"hello"


def test_an_interrupted_cascade_is_finished_on_sight(backend: Backend, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A process dies between deleting a soft-deleted source's last fork and removing the
    source: the next instance to look at the path finishes the job instead of answering 410
    (for reads) or 409 (for a create) until the collector runs."""
    store = make_store(backend)
    create(store, "src", b"data")
    fork(store, "f", "src")
    assert store.delete("src") is Presence.FOUND  # soft: the fork still reads it
    monkeypatch.setattr(store, "_cascade", lambda released: None)
    assert store.delete("f") is Presence.FOUND
    assert stream_items(backend)["src"]["refs"] == {"N": "0"}  # soft-deleted, no fork left
    other = make_store(backend)
    assert other.get("src") is None
    assert create(other, "src", b"new") is CreateStatus.CREATED
    assert read(other, "src") == b"new"
    assert_reference_counts_exact(backend)


def test_json_forks_must_start_between_messages(backend: Backend) -> None:
    """Inside a message, a fork would hold half of it and no read could ever return it."""
    store = make_store(backend)
    body = b'[1, "twenty-two", 333]'
    messages = (b"1", b'"twenty-two"', b"333")
    payload = Payload(b"".join(messages), tuple(len(m) for m in messages))
    store.create("j", CreateSpec("application/json", payload=payload))
    assert body  # positions: "1" 0-1, "twenty-two" 1-13, 333 13-16
    for inside in (2, 5, 12, 14):
        assert fork(store, f"f{inside}", "j", anchor=inside) is CreateStatus.OFFSET_NOT_A_BOUNDARY
    for boundary in (0, 1, 13, 16):
        assert fork(store, f"f{boundary}", "j", anchor=boundary) is CreateStatus.CREATED
    assert_reference_counts_exact(backend)


def test_the_collector_reading_two_items_a_page_removes_the_same(backend: Backend) -> None:
    """On the embedded emulator (`dsaws serve`) each call of the collector is a step requests
    may wait for, so its Scans and Queries read pages of `page_items`: counted here (DynamoDB
    counts the items a Scan reads, before its filter), and nothing is left behind."""
    store = make_store(backend)
    for path in ("a", "b", "c"):
        create(store, path, b"data-of-" + path.encode() * 40)
        store.append(path, AppendIntent(TEXT, True, False), Payload(b"+more"))
    assert store.delete("a") is Presence.FOUND
    assert store.delete("b") is Presence.FOUND
    read_per_call: list[int] = []

    def count(parsed: dict[str, Any], **_: Any) -> None:
        read_per_call.append(int(parsed.get("ScannedCount", len(parsed.get("Items", [])))))

    events = store.dynamodb.meta.events
    events.register("after-call.dynamodb.Scan", count)
    events.register("after-call.dynamodb.Query", count)
    try:
        report = Collector(store, orphan_grace_seconds=0, page_items=2).run()
    finally:
        events.unregister("after-call.dynamodb.Scan", count)
        events.unregister("after-call.dynamodb.Query", count)
    assert report.incarnations_removed == 2 and report.objects_deleted > 0
    assert max(read_per_call) == 2
    assert read(store, "c") == b"data-of-" + b"c" * 40 + b"+more"
    assert_data_bound_to_incarnations(backend)


class _RefusingDeletes:
    """An S3 client whose DeleteObjects answers as S3 does to a role without
    `s3:DeleteObject`: 200, each key listed in `Errors`, nothing deleted."""

    def __init__(self, s3: Any) -> None:
        self._s3 = s3

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)

    def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:
        errors = [
            {"Key": o["Key"], "Code": "AccessDenied", "Message": "Access Denied"}
            for o in Delete["Objects"]
        ]
        return {"Errors": errors}


def test_objects_s3_refuses_to_delete_keep_their_incarnation_for_the_next_run(
    backend: Backend,
) -> None:
    store = make_store(backend)
    create(store, "s", b"stored in an object")
    create(store, "kept", b"still read")
    assert store.delete("s") is Presence.FOUND
    before = data_keys(backend)
    refused = DynamoStore(
        backend.dynamodb,
        _RefusingDeletes(backend.s3),
        backend.settings.table,
        backend.settings.bucket,
    )
    report = Collector(refused, orphan_grace_seconds=0).run()
    assert report.objects_failed == 1 and report.objects_deleted == 0
    assert report.incarnations_removed == 0
    assert data_keys(backend) == before  # the items naming the object, and the marker, stay
    report = Collector(store, orphan_grace_seconds=0).run()
    assert report.objects_failed == 0 and report.incarnations_removed == 1
    assert read(store, "kept") == b"still read"
    assert_data_bound_to_incarnations(backend)
