"""The subscription rules (pure): pending work, wakes, leases, claims, fencing, acks, backoff."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from durable_streams_aws.core.subscriptions import (
    Ack,
    Delivery,
    Link,
    StreamTail,
    Subscription,
    SubscriptionConfig,
    SubscriptionError,
)
from durable_streams_aws.core.subscriptions.model import WakeStream
from durable_streams_aws.core.subscriptions.rules import (
    MAX_WAKE_PATH_BYTES,
    MAX_WAKE_STREAMS,
    ClaimKind,
    check_acks,
    check_current,
    claimed,
    cleared,
    decide_claim,
    extended,
    is_idle,
    lease_expired,
    link_statuses,
    new_wake,
    parse_acks,
    retry_delay,
)

NOW = 1_900_000_000.0


def subscription(delivery: Delivery = Delivery.WEBHOOK, lease_ms: int = 2000) -> Subscription:
    config = SubscriptionConfig(
        delivery,
        "a/*",
        (),
        "https://hooks.example/x" if delivery is Delivery.WEBHOOK else None,
        "wake/pool" if delivery is Delivery.PULL_WAKE else None,
        lease_ms,
        None,
    )
    return Subscription("s", "inc1", config, "hash", NOW - 100, version=3, generation=6)


def link(path: str, acked: int, incarnation: str | None = "i1") -> Link:
    return Link(path, glob=True, explicit=False, acked=acked, incarnation=incarnation)


def test_pending_is_a_tail_past_the_ack_of_the_same_incarnation() -> None:
    links = [link("a/1", 10), link("a/2", 10), link("a/3", 10), link("a/4", 0, None)]
    tails = {
        "a/1": StreamTail("i1", 10),  # caught up
        "a/2": StreamTail("i1", 25),  # 15 bytes pending
        "a/3": StreamTail("i2", 4),  # re-created: its ack belongs to the old incarnation
        "a/4": StreamTail("i9", 7),  # linked from the beginning of whatever comes first
    }
    statuses = {s.link.path: s for s in link_statuses(links, tails)}
    assert [statuses[p].has_pending for p in ("a/1", "a/2", "a/3", "a/4")] == [
        False,
        True,
        True,
        True,
    ]
    assert statuses["a/3"].acked == 0
    assert statuses["a/2"].acked == 10


def test_an_absent_stream_has_nothing_pending_and_an_ack_is_never_past_the_tail() -> None:
    statuses = link_statuses(
        [link("a/gone", 50), link("a/short", 50)], {"a/short": StreamTail("i1", 20)}
    )
    by_path = {s.link.path: s for s in statuses}
    assert not by_path["a/gone"].has_pending and by_path["a/gone"].tail == 0
    assert by_path["a/short"].acked == 20


def test_every_wake_is_leased_from_its_issue() -> None:
    statuses = link_statuses([link("a/1", 0)], {"a/1": StreamTail("i1", 5)})
    webhook = new_wake(subscription(), statuses, NOW, holder=None)
    assert webhook.generation == 7 and webhook.wake is not None
    assert webhook.wake.generation == 7 and webhook.wake.lease_expires_at == NOW + 2
    assert webhook.wake.streams == (WakeStream("a/1", "glob", 0, 5, "i1"),)
    pull = new_wake(subscription(Delivery.PULL_WAKE), statuses, NOW, holder=None)
    assert pull.wake is not None and pull.wake.holder is None
    # Unclaimed for a lease, it is announced again: a lost wake event holds nothing for ever.
    assert not lease_expired(pull.wake, NOW + 1.9) and lease_expired(pull.wake, NOW + 2)
    other = new_wake(subscription(), statuses, NOW, holder=None)
    assert other.wake is not None and other.wake.wake_id != webhook.wake.wake_id


def test_a_wake_names_only_pending_streams_and_at_most_a_bounded_number() -> None:
    links = [link(f"a/{i}", 0) for i in range(MAX_WAKE_STREAMS + 20)] + [link("a/idle", 3)]
    tails = {f"a/{i}": StreamTail("i1", 1) for i in range(MAX_WAKE_STREAMS + 20)}
    tails["a/idle"] = StreamTail("i1", 3)
    woken = new_wake(subscription(), link_statuses(links, tails), NOW, holder=None)
    assert woken.wake is not None
    assert len(woken.wake.streams) == MAX_WAKE_STREAMS
    assert "a/idle" not in {stream.path for stream in woken.wake.streams}


def test_a_wake_names_at_most_a_bounded_size_of_paths() -> None:
    long = [link(f"a/{'x' * 1000}{i}", 0) for i in range(80)]
    tails = {lk.path: StreamTail("i1", 1) for lk in long}
    woken = new_wake(subscription(), link_statuses(long, tails), NOW, holder=None)
    assert woken.wake is not None
    count = len(woken.wake.streams)
    names = sum(len(stream.path.encode()) for stream in woken.wake.streams)
    assert names <= MAX_WAKE_PATH_BYTES < names + len(long[count].path.encode())  # as many as fit


def test_idle_means_no_wake_or_an_expired_lease() -> None:
    sub = subscription()
    assert is_idle(sub, NOW)
    woken = new_wake(sub, (), NOW, holder=None)
    assert not is_idle(woken, NOW + 1.999)
    assert is_idle(woken, NOW + 2)
    assert is_idle(cleared(woken), NOW)
    longer = extended(woken, NOW + 1.5)
    assert not is_idle(longer, NOW + 3) and is_idle(longer, NOW + 3.5)


def test_fencing_needs_the_current_generation_and_wake_within_its_lease() -> None:
    woken = new_wake(subscription(), (), NOW, holder=None)
    wake = woken.wake
    assert wake is not None
    assert check_current(woken, wake.generation, wake.wake_id, NOW + 1) == wake
    stale = [
        (wake.generation - 1, wake.wake_id, NOW),  # an older generation
        (wake.generation, "w_other", NOW),  # another wake of the same generation
        (True, wake.wake_id, NOW),  # JSON true is not the number 1
        (float(wake.generation), wake.wake_id, NOW),  # nor is 7.0 the generation 7
        (str(wake.generation), wake.wake_id, NOW),
        (wake.generation, wake.wake_id, NOW + 2),  # the lease ran out
    ]
    for generation, wake_id, now in stale:
        with pytest.raises(SubscriptionError) as refused:
            check_current(woken, generation, wake_id, now)
        assert refused.value.status == 409 and refused.value.code == "FENCED"
    for ended in (cleared(woken), replace(woken, deleted=True)):
        with pytest.raises(SubscriptionError):
            check_current(ended, wake.generation, wake.wake_id, NOW)


def test_claims_take_the_wake_in_flight_refuse_a_held_lease_and_replace_an_expired_one() -> None:
    sub = subscription(Delivery.PULL_WAKE)
    assert decide_claim(sub, NOW).kind is ClaimKind.NEW
    waiting = new_wake(sub, (), NOW, holder=None)
    assert decide_claim(waiting, NOW + 1).kind is ClaimKind.TAKE
    assert decide_claim(waiting, NOW + 2).kind is ClaimKind.NEW  # unclaimed too long
    held = claimed(waiting, "worker-1", NOW + 1)
    busy = decide_claim(held, NOW + 2.5)
    assert busy.kind is ClaimKind.BUSY and busy.holder == "worker-1"
    assert decide_claim(held, NOW + 3).kind is ClaimKind.NEW  # the 2 s lease ran out


def test_acks_move_cursors_forward_only_and_are_refused_whole_when_wrong() -> None:
    statuses = link_statuses(
        [link("a/1", 10), link("a/2", 0)], {"a/1": StreamTail("i1", 30), "a/2": StreamTail("i1", 8)}
    )
    forward = check_acks([Ack("a/1", 20), Ack("a/1", 25), Ack("a/1", 5), Ack("a/2", 8)], statuses)
    assert sorted((a.path, a.position) for a in forward) == [("a/1", 25), ("a/2", 8)]
    assert check_acks([Ack("a/1", 10)], statuses) == ()  # a repeat changes nothing
    for wrong in ([Ack("a/other", 1)], [Ack("a/2", 9)], [Ack("a/1", 20), Ack("a/2", 99)]):
        with pytest.raises(SubscriptionError) as refused:
            check_acks(wrong, statuses)
        assert refused.value.status == 409 and refused.value.code == "INVALID_OFFSET"


def test_acks_of_announced_streams_apply_only_to_the_incarnation_announced() -> None:
    """A stream the wake announced that has since been re-created, deleted or unlinked: its
    ack is dropped (the new incarnation keeps every byte pending), the others apply."""
    announced = (
        WakeStream("a/recreated", "glob", 0, 100, "old"),
        WakeStream("a/deleted", "glob", 0, 100, "i1"),
        WakeStream("a/unlinked", "glob", 0, 100, "i1"),
        WakeStream("a/kept", "glob", 0, 100, "i1"),
    )
    statuses = link_statuses(
        [link("a/recreated", 0, None), link("a/deleted", 0), link("a/kept", 0)],
        {"a/recreated": StreamTail("new", 150), "a/kept": StreamTail("i1", 120)},
    )
    acks = [Ack(stream.path, 100) for stream in announced]
    assert check_acks(acks, statuses, announced) == (Ack("a/kept", 100),)
    # Unannounced, the same acks are judged against what is there now.
    with pytest.raises(SubscriptionError) as refused:
        check_acks(acks, statuses)
    assert refused.value.code == "INVALID_OFFSET"
    # An announced stream of the same incarnation is still refused past its tail.
    with pytest.raises(SubscriptionError):
        check_acks([Ack("a/kept", 121)], statuses, announced)


@pytest.mark.parametrize(
    "value",
    [{}, "x", [1], [{"stream": "a"}], [{"stream": 1, "offset": "0"}], [{"offset": "0"}]],
)
def test_malformed_ack_lists_are_refused(value: object) -> None:
    with pytest.raises(SubscriptionError) as refused:
        parse_acks(value)
    assert refused.value.status == 400


def test_ack_lists_accept_stream_and_offset_pairs() -> None:
    assert parse_acks(None) == ()
    assert parse_acks([{"stream": "a/1", "offset": "x"}]) == (("a/1", "x"),)


def test_backoff_doubles_from_one_second_to_a_minute_with_a_fifth_of_jitter() -> None:
    rng = random.Random(7)
    for failures, base in [(1, 1), (2, 2), (3, 4), (6, 32), (7, 60), (40, 60)]:
        delays = [retry_delay(failures, rng) for _ in range(200)]
        assert min(delays) >= base * 0.8 and max(delays) <= base * 1.2
        assert max(delays) - min(delays) > base * 0.2  # jitter spreads retries out
