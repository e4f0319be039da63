"""Subscriptions over streams retention cut (issue 40), through the store: a link whose acked
position is no longer retained resumes at the stream's earliest retained offset, the move is
written with the subscription's version (by the wake, a claim, or the description's read),
and the subscription's description says so; a link that is not below is untouched.

The cut is written on the stream item as the retention run records it (`rf`, and `snap` for a
compacted stream's snapshot), with the storage layer's own encoding."""

from __future__ import annotations

from typing import Any

import pytest
from support import FakeClock
from test_subscription_service import (
    ROOT,
    Hook,
    append,
    create_stream,
    instance,
    pull,
    run_all,
    webhook,
)

from durable_streams_aws.core.protocol.offsets import format_offset, format_snapshot_offset
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, Payload
from durable_streams_aws.core.storage import table as items
from durable_streams_aws.core.storage._items import encode_retained
from durable_streams_aws.core.storage.model import Retained, Snapshot
from durable_streams_aws.core.subscriptions import Sent, Subscriptions, stream_report
from durable_streams_aws.core.subscriptions.model import Skip, _iso

pytestmark = pytest.mark.both_dynamodbs


@pytest.fixture
def clock() -> FakeClock:
    import time

    return FakeClock(time.time())


def retain_from(backend: Backend, path: str, start: int, *, snapshot: bool = False) -> None:
    """Record on the stream's item that its data now starts at `start` (with a compaction's
    snapshot of what is before it)."""
    folded = Snapshot(start, f"snap-{path}", 1, 2, start) if snapshot else None
    fields = encode_retained(Retained(start, folded))
    backend.dynamodb.update_item(
        TableName=backend.settings.table,
        Key=items.stream_key(path),
        UpdateExpression="SET " + ", ".join(f"#{name} = :{name}" for name in fields),
        ExpressionAttributeNames={f"#{name}": name for name in fields},
        ExpressionAttributeValues={f":{name}": value for name, value in fields.items()},
        ConditionExpression="attribute_exists(pk)",
    )


def described(service: Subscriptions, sid: str) -> dict[str, dict[str, Any]]:
    _, statuses = service.describe(sid)
    return {status.link.path: stream_report(status) for status in statuses}


def current_version(service: Subscriptions, sid: str) -> int:
    subscription = service.store.get(sid)
    assert subscription is not None
    return subscription.version


def recorded(service: Subscriptions, sid: str) -> dict[str, tuple[int, bool, Skip | None]]:
    """The link items as stored: acked position, at a snapshot, the move recorded."""
    store = service.store
    subscription = store.get(sid)
    assert subscription is not None
    return {
        link.path: (link.acked, link.acked_snapshot, link.skipped)
        for link in store.links(subscription)
    }


def caught_up(backend: Backend, clock: FakeClock, hook: Hook) -> tuple[Subscriptions, Any]:
    """A webhook subscription whose two streams are acked at 10 (their tails), then grow."""
    hook.answer = Sent(True, done=True)
    one = instance(backend, clock, hook)
    service, _ = one
    service.create("s", webhook(lease_ttl_ms=5000), ROOT)
    for path in ("jobs/cut", "jobs/kept"):
        create_stream(backend.store, path, b"0123456789")
        service.changed(path)
    run_all(one)  # one wake, answered done: both acked at their tails
    assert recorded(service, "s") == {"jobs/cut": (10, False, None), "jobs/kept": (10, False, None)}
    for path in ("jobs/cut", "jobs/kept"):
        append(backend.store, path, b"abcdefghij")  # tails at 20
    return one


def test_the_description_shows_a_link_below_retention_resumed_and_records_it(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    service, _ = caught_up(backend, clock, hook)
    retain_from(backend, "jobs/cut", 15)  # acked 10: gone
    retain_from(backend, "jobs/kept", 5)  # acked 10: still there
    version = current_version(service, "s")
    clock.now += 1
    streams = described(service, "s")
    skip = {"from": format_offset(10), "to": format_offset(15), "at": _iso(clock.now)}
    assert streams["jobs/cut"]["acked_offset"] == format_offset(15)
    assert streams["jobs/cut"]["skipped"] == skip
    assert streams["jobs/kept"] == {
        "path": "jobs/kept",
        "link_type": "glob",
        "acked_offset": format_offset(10),
        "skipped": None,
    }
    # Recorded with the subscription's version, and shown as recorded from then on.
    assert current_version(service, "s") == version + 1
    incarnation = service.store.tails(["jobs/cut"])["jobs/cut"].incarnation
    move = Skip(format_offset(10), format_offset(15), clock.now, incarnation)
    assert recorded(service, "s") == {
        "jobs/cut": (15, False, move),
        "jobs/kept": (10, False, None),
    }
    clock.now += 60
    again = described(service, "s")
    assert again["jobs/cut"]["skipped"] == skip  # the time it moved, not the time it was read
    assert current_version(service, "s") == version + 1


def test_a_wake_announces_the_earliest_offset_and_records_the_move_with_it(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    one = caught_up(backend, clock, hook)
    service, _ = one
    retain_from(backend, "jobs/cut", 15)
    hook.answer = Sent(True)  # the worker will call back
    service.changed("jobs/cut")
    run_all(one)
    wake = hook.bodies[-1]
    streams = {stream["path"]: stream for stream in wake["streams"]}
    assert streams["jobs/cut"]["acked_offset"] == format_offset(15)
    assert streams["jobs/kept"]["acked_offset"] == format_offset(10)  # untouched
    links = recorded(service, "s")
    assert links["jobs/cut"][:2] == (15, False) and links["jobs/cut"][2] is not None
    assert links["jobs/kept"] == (10, False, None)
    assert described(service, "s")["jobs/cut"]["skipped"] == {
        "from": format_offset(10),
        "to": format_offset(15),
        "at": _iso(clock.now),
    }


def test_a_compacted_stream_resumes_at_its_snapshot_until_a_worker_reads_past_it(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    one = caught_up(backend, clock, hook)
    service, _ = one
    retain_from(backend, "jobs/cut", 20, snapshot=True)  # folded up to the tail
    hook.answer = Sent(True)
    service.sweep()  # idle with pending work (the snapshot, though nothing follows it)
    run_all(one)
    wake = hook.bodies[-1]
    (stream,) = [s for s in wake["streams"] if s["path"] == "jobs/cut"]
    assert stream["acked_offset"] == format_snapshot_offset(20)
    assert (stream["tail_offset"], stream["has_pending"]) == (format_offset(20), True)
    assert recorded(service, "s")["jobs/cut"][:2] == (20, True)
    # {"done": true} acks the tail it was told: past the snapshot, nothing pending any more.
    hook.answer = Sent(True, done=True)
    service.deliver("s", wake["generation"])  # delivered again, this time answered done
    assert recorded(service, "s")["jobs/cut"][:2] == (20, False)
    streams = described(service, "s")
    assert streams["jobs/cut"]["acked_offset"] == format_offset(20)
    assert streams["jobs/cut"]["skipped"]["to"] == format_snapshot_offset(20)


def test_a_claim_hands_out_the_earliest_offset_and_records_the_move(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    one = instance(backend, clock, hook)
    service, tasks = one
    store = backend.store
    store.create("wake/pool", CreateSpec("application/json", None, None, False, Payload()))
    create_stream(store, "jobs/p", b"0123456789")
    service.create("p", pull(), ROOT)  # linked at 10
    append(store, "jobs/p", b"abcdefghij")
    retain_from(backend, "jobs/p", 12)
    tasks.take()  # the creation's check: left for the claim to do
    won = service.claim("p", "w1")
    assert [s.report()["acked_offset"] for s in won.streams] == [format_offset(12)]
    assert recorded(service, "p")["jobs/p"][:2] == (12, False)
