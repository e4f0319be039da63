"""Subscriptions over streams that retention cut (issue 40), the pure part: a link whose acked
position is no longer retained resumes at the stream's earliest retained offset (a compacted
stream's snapshot, or where its data starts), and records the move for its description."""

from __future__ import annotations

from dataclasses import replace

from durable_streams_aws.core.protocol.offsets import format_offset, format_snapshot_offset
from durable_streams_aws.core.storage.model import Retained, Snapshot
from durable_streams_aws.core.subscriptions import (
    Ack,
    Delivery,
    Link,
    StreamTail,
    Subscription,
    SubscriptionConfig,
    stream_report,
)
from durable_streams_aws.core.subscriptions.model import Skip, WakeStream
from durable_streams_aws.core.subscriptions.rules import (
    MAX_ACKS,
    check_acks,
    link_statuses,
    resumes,
)
from durable_streams_aws.core.subscriptions.store import (
    SubscriptionStore,
    decode_link,
    decode_skip,
    encode_skip,
)

NOW = 1_900_000_000.0


def link(path: str, acked: int, incarnation: str | None = "i1", **extra: object) -> Link:
    return Link(path, glob=True, explicit=False, acked=acked, incarnation=incarnation, **extra)


def cut(start: int) -> Retained:
    return Retained(start)


def compacted(at: int) -> Retained:
    return Retained(at, Snapshot(at, "k", 10, 4, at))


def test_a_link_acked_below_the_retained_start_resumes_there_and_says_so() -> None:
    links = [link("a/below", 10), link("a/at", 15), link("a/above", 30), link("a/new", 0, None)]
    tails = {
        "a/below": StreamTail("i1", 40, cut(15)),
        "a/at": StreamTail("i1", 40, cut(15)),
        "a/above": StreamTail("i1", 40, cut(15)),
        "a/new": StreamTail("i1", 40, cut(15)),  # linked from the beginning: 0 is gone too
    }
    statuses = {s.link.path: s for s in link_statuses(links, tails, NOW)}
    below = statuses["a/below"]
    assert (below.acked, below.resuming, below.has_pending) == (15, True, True)
    assert below.skipped == Skip(format_offset(10), format_offset(15), NOW, "i1")
    assert statuses["a/new"].skipped == Skip(format_offset(0), format_offset(15), NOW, "i1")
    for untouched, at in (("a/at", 15), ("a/above", 30)):
        assert (statuses[untouched].acked, statuses[untouched].resuming) == (at, False)
        assert statuses[untouched].skipped is None
    report = stream_report(below)
    assert report["acked_offset"] == format_offset(15)
    assert report["skipped"] == {
        "from": format_offset(10),
        "to": format_offset(15),
        "at": "2030-03-17T17:46:40.000Z",
    }
    assert stream_report(statuses["a/at"])["skipped"] is None


def test_an_exact_ack_below_the_cut_is_named_as_it_was() -> None:
    (status,) = link_statuses(
        [link("a/x", 7, acked_exact=True)], {"a/x": StreamTail("i1", 20, cut(12))}, NOW
    )
    assert status.skipped is not None
    assert status.skipped.from_offset == format_offset(7, inside=True)
    assert (status.acked, status.acked_exact) == (12, False)


def test_a_compacted_stream_resumes_at_its_snapshot_which_is_pending_work() -> None:
    tails = {"a/c": StreamTail("i1", 50, compacted(50))}  # nothing after the snapshot yet
    (status,) = link_statuses([link("a/c", 20)], tails, NOW)
    assert (status.acked, status.acked_snapshot, status.resuming) == (50, True, True)
    assert status.has_pending  # the snapshot itself is still to be read
    assert status.skipped is not None and status.skipped.to_offset == format_snapshot_offset(50)
    assert stream_report(status)["acked_offset"] == format_snapshot_offset(50)
    wake = status.snapshot()
    assert wake.report()["acked_offset"] == format_snapshot_offset(50)
    assert wake.report()["has_pending"] is True
    # Recorded, the link sits at the snapshot: not below the retained start any more.
    recorded = link("a/c", 50, acked_snapshot=True, skipped=status.skipped)
    (again,) = link_statuses([recorded], tails, NOW + 5)
    assert (again.acked_snapshot, again.resuming, again.skipped) == (True, False, status.skipped)
    # A later compaction replaces that snapshot: the link moves on to the new one.
    (later,) = link_statuses([recorded], {"a/c": StreamTail("i1", 90, compacted(80))}, NOW + 9)
    assert later.skipped == Skip(
        format_snapshot_offset(50), format_snapshot_offset(80), NOW + 9, "i1"
    )


def test_acks_order_a_snapshot_just_before_its_position() -> None:
    tails = {"a/c": StreamTail("i1", 50, compacted(50))}
    (status,) = link_statuses([link("a/c", 50, acked_snapshot=True)], tails, NOW)
    # Acking the snapshot's own token (where it was told to start) moves nothing.
    assert check_acks([Ack("a/c", 50, snapshot=True)], [status]) == ()
    # Acking the position after it (the snapshot was read; nothing came after) moves it.
    assert check_acks([Ack("a/c", 50)], [status]) == (Ack("a/c", 50),)
    # An ack of bytes read before the cut is below where the link resumes: dropped.
    (gone,) = link_statuses([link("a/c", 10)], tails, NOW)
    assert check_acks([Ack("a/c", 30)], [gone]) == ()


def test_a_move_made_in_a_deleted_incarnation_is_not_shown() -> None:
    skip = Skip(format_offset(1), format_offset(5), NOW, "old")
    (status,) = link_statuses([link("a/r", 9, "old", skipped=skip)], {"a/r": StreamTail("i2", 3)})
    assert (status.acked, status.skipped, status.resuming) == (0, None, False)
    (same,) = link_statuses([link("a/r", 9, "old", skipped=skip)], {"a/r": StreamTail("old", 9)})
    assert same.skipped == skip


def test_an_absent_stream_has_nothing_to_resume() -> None:
    (status,) = link_statuses([link("a/gone", 3)], {}, NOW)
    assert (status.resuming, status.has_pending) == (False, False)


def test_resumes_are_acks_recording_the_moves_at_most_one_transaction_of_them() -> None:
    tails = {f"a/{i:03d}": StreamTail("i1", 40, cut(15)) for i in range(MAX_ACKS + 5)}
    links = [link(path, 10) for path in tails] + [link("a/fine", 20)]
    tails["a/fine"] = StreamTail("i1", 40, cut(15))
    statuses = link_statuses(links, tails, NOW)
    moves = resumes(statuses)
    assert len(moves) == MAX_ACKS
    first = moves[0]
    assert (first.path, first.position, first.snapshot) == ("a/000", 15, False)
    assert first.skipped == Skip(format_offset(10), format_offset(15), NOW, "i1")
    assert all(move.path != "a/fine" for move in moves)
    assert resumes(replace(s, resuming=False) for s in statuses) == ()


def test_the_link_item_keeps_the_move() -> None:
    skip = Skip(format_offset(10), format_snapshot_offset(15), NOW, "i1")
    assert decode_skip(encode_skip(skip)) == skip
    assert decode_skip(encode_skip(replace(skip, incarnation=None))) == replace(
        skip, incarnation=None
    )
    item = {
        "pk": {"S": "sl#x"},
        "sk": {"S": "a/c"},
        "acked": {"N": "15"},
        "linc": {"S": "i1"},
        "acks": {"BOOL": True},
        "skip": encode_skip(skip),
    }
    decoded = decode_link(item)
    assert (decoded.acked, decoded.acked_snapshot, decoded.skipped) == (15, True, skip)
    plain = decode_link({"pk": {"S": "sl#x"}, "sk": {"S": "a/d"}, "acked": {"N": "3"}})
    assert (plain.acked_snapshot, plain.skipped) == (False, None)


def test_an_ack_update_moves_only_forward_and_records_a_move() -> None:
    config = SubscriptionConfig(Delivery.WEBHOOK, "a/*", (), "https://h.example/", None, 2000, None)
    owner = Subscription("s", "s1", config, "hash", NOW, version=1)
    store = SubscriptionStore(None, "t")
    skip = Skip(format_offset(10), format_snapshot_offset(15), NOW, "i1")
    plain = store._ack_update(owner, Ack("a/c", 15), {"a/c": "i1"})
    # A plain ack moves a link at the same position's snapshot (the snapshot was read).
    assert "#acks = :snapped" in plain["ConditionExpression"]
    assert "#skip" not in plain["UpdateExpression"]
    moved = store._ack_update(owner, Ack("a/c", 15, snapshot=True, skipped=skip), {"a/c": "i1"})
    assert ":snapped" not in moved["ExpressionAttributeValues"]
    assert moved["ExpressionAttributeValues"][":skip"] == encode_skip(skip)
    for update in (plain, moved):  # DynamoDB refuses a value or name the expressions do not use
        expressions = update["UpdateExpression"] + update["ConditionExpression"]
        assert all(name in expressions for name in update["ExpressionAttributeNames"])
        assert all(value in expressions for value in update["ExpressionAttributeValues"])


def test_a_wake_stored_by_a_newer_version_still_decodes() -> None:
    from durable_streams_aws.core.subscriptions.store import _known

    stored = {
        "path": "a",
        "link_type": "glob",
        "acked": 1,
        "tail": 2,
        "incarnation": "i1",
        "acked_exact": False,
        "acked_snapshot": True,
        "from_the_future": 1,
    }
    assert WakeStream(**_known(stored)) == WakeStream("a", "glob", 1, 2, "i1", False, True)
