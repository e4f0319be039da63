"""The pure rules of retention and compaction: policies, cuts, the cache bound, the snapshot's
offset, where a read starts, and the State Protocol fold."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from durable_streams_aws.core.http.retained import StartFrom, asked_offset, retained_start
from durable_streams_aws.core.protocol.compaction import StateFold, fold_state
from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.offsets import (
    format_offset,
    format_snapshot_offset,
    parse_offset,
    parse_position,
    parse_read_start,
)
from durable_streams_aws.core.protocol.retention import (
    Cut,
    RetentionPolicy,
    SealedSpan,
    cache_seconds_left,
    parse_prefix_defaults,
    parse_retention,
    policy_for,
    retention_cut,
)
from durable_streams_aws.core.storage.model import Retained, Snapshot

# ----------------------------------------------------------------------------- policies


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("compact", RetentionPolicy(compact=True)),
        (" compact ", RetentionPolicy(compact=True)),
        ("max-age=60", RetentionPolicy(max_age=60)),
        ("max-bytes=1000", RetentionPolicy(max_bytes=1000)),
        ("max-bytes=5; max-age=7", RetentionPolicy(max_age=7, max_bytes=5)),
    ],
)
def test_policies_parse_and_print_canonically(value: str, policy: RetentionPolicy) -> None:
    assert parse_retention(value) == policy
    assert parse_retention(policy.header()) == policy


@pytest.mark.parametrize(
    "value",
    ["", "compact; max-age=1", "max-age=0", "max-age=-1", "max-age=01", "max-age=1; max-age=2",
     "max-age", "ttl=5", "max-age=1,max-bytes=2", "max-age=12345678901234567"],
)  # fmt: skip
def test_malformed_policies_are_400(value: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_retention(value)
    assert refused.value.status == 400


def test_no_header_is_no_policy_and_a_policy_needs_something() -> None:
    assert parse_retention(None) is None
    with pytest.raises(ValueError):
        RetentionPolicy()
    with pytest.raises(ValueError):
        RetentionPolicy(max_age=1, compact=True)
    assert RetentionPolicy(max_age=1, max_bytes=2).header() == "max-age=1; max-bytes=2"


def test_the_longest_prefix_default_applies_unless_the_create_names_one() -> None:
    defaults = parse_prefix_defaults(
        "logs/=max-age=60, logs/audit/=max-bytes=9; max-age=5, =compact"
    )
    assert policy_for("logs/audit/x", None, defaults) == RetentionPolicy(max_age=5, max_bytes=9)
    assert policy_for("logs/x", None, defaults) == RetentionPolicy(max_age=60)
    assert policy_for("other", None, defaults) == RetentionPolicy(compact=True)
    asked = RetentionPolicy(max_bytes=1)
    assert policy_for("logs/x", asked, defaults) is asked
    assert policy_for("x", None, ()) is None
    for bad in ("logs/", "logs/=nothing", "a=compact, b"):
        with pytest.raises(ValueError):
            parse_prefix_defaults(bad)


# ----------------------------------------------------------------------------- cuts


def test_retention_cuts_at_the_last_segment_the_policy_drops_whole() -> None:
    spans = [SealedSpan(100, 10.0), SealedSpan(250, 20.0), SealedSpan(400, 30.0)]
    by_size = RetentionPolicy(max_bytes=300)
    assert retention_cut(by_size, spans, tail=500, now=0) == 100  # 500-250 < 300
    assert retention_cut(by_size, spans, tail=550, now=0) == 250
    assert retention_cut(by_size, spans, tail=350, now=0) == 0
    by_age = RetentionPolicy(max_age=15)
    assert retention_cut(by_age, spans, tail=500, now=30.0) == 100
    assert retention_cut(by_age, spans, tail=500, now=45.0) == 400
    both = RetentionPolicy(max_age=15, max_bytes=300)
    assert retention_cut(both, spans, tail=600, now=30.0) == 250  # whichever drops more
    # Segments sealed before seal times were kept go with a later one that has its time.
    legacy = [SealedSpan(100, None), SealedSpan(250, None), SealedSpan(400, 30.0)]
    assert retention_cut(by_age, legacy, tail=500, now=40.0) == 0
    assert retention_cut(by_age, legacy, tail=500, now=50.0) == 400


def test_a_pending_cut_bounds_how_long_caches_keep_what_it_drops() -> None:
    cut = Cut(at=100, effective_at=50.0)
    assert cache_seconds_left(None, 0, 10.0) is None
    assert cache_seconds_left(cut, 100, 10.0) is None  # at or past the cut: kept as ever
    assert cache_seconds_left(cut, 99, 10.0) == 39.0  # less a second of cache clock
    assert cache_seconds_left(cut, 99, 10.0, now=49.5) == 0.0  # sent late: not cached
    assert cache_seconds_left(cut, 99, 50.0) is None  # decided after it took effect
    assert cut.effective(50.0) and not cut.effective(49.9)


# ----------------------------------------------------------------------------- offsets


def test_a_snapshot_token_sorts_between_the_positions_around_it() -> None:
    token = format_snapshot_offset(1000)
    assert token == format_offset(999) + "_s"
    assert format_offset(999) < format_offset(999, inside=True) < token < format_offset(1000)
    assert parse_offset(token).snapshot and parse_offset(token).at == 1000
    start = parse_read_start([token])
    assert start.snapshot and start.position == 1000 and not start.whole
    with pytest.raises(ProtocolError):
        parse_position(token)  # names no position: not an until, not a fork offset
    with pytest.raises(ProtocolError):
        parse_offset("9" * 16 + "_" + "9" * 16 + "_s")


SNAPSHOT = Snapshot(at=500, key="k", size=10, count=3, folded=500)


@pytest.mark.parametrize(
    ("retained", "token", "kind", "position"),
    [
        (Retained(), "-1", StartFrom.POSITION, 0),
        (Retained(300), "-1", StartFrom.POSITION, 300),
        (Retained(500, SNAPSHOT), "-1", StartFrom.SNAPSHOT, None),
        (Retained(300), format_offset(299), StartFrom.GONE, None),
        (Retained(300), format_offset(299, inside=True), StartFrom.GONE, None),
        (Retained(300), format_offset(300), StartFrom.POSITION, None),
        (Retained(500, SNAPSHOT), format_snapshot_offset(500), StartFrom.SNAPSHOT, None),
        (Retained(500, SNAPSHOT), format_snapshot_offset(400), StartFrom.GONE, None),
        (Retained(500, SNAPSHOT), format_offset(0), StartFrom.GONE, None),
        (Retained(500, SNAPSHOT), "now", StartFrom.POSITION, None),
    ],
)
def test_where_a_read_starts(
    retained: Retained, token: str, kind: StartFrom, position: int | None
) -> None:
    decided = retained_start(retained, parse_read_start([token]))
    assert (decided.kind, decided.position) == (kind, position)


def test_a_snapshot_token_above_the_retained_start_is_not_an_offset_of_this_stream() -> None:
    with pytest.raises(ProtocolError) as refused:
        retained_start(Retained(500, SNAPSHOT), parse_read_start([format_snapshot_offset(900)]))
    assert refused.value.status == 400
    for token in (format_snapshot_offset(7), format_offset(7), format_offset(7, inside=True)):
        assert asked_offset(parse_read_start([token])) == token


def test_the_earliest_offset_is_the_snapshot_or_the_retained_start() -> None:
    assert Retained().earliest_offset == format_offset(0) and not Retained().dropped
    assert Retained(300).earliest_offset == format_offset(300)
    assert Retained(500, SNAPSHOT).earliest_offset == format_snapshot_offset(500)


# ----------------------------------------------------------------------------- the fold


def change(operation: str, key: str, value: Any = None, kind: str = "row") -> bytes:
    message: dict[str, Any] = {"type": kind, "key": key, "headers": {"operation": operation}}
    if value is not None:
        message["value"] = value
    return json.dumps(message).encode()


def control(name: str) -> bytes:
    return json.dumps({"headers": {"control": name}}).encode()


def test_the_fold_materializes_as_create_stream_db_does() -> None:
    fold, refused = fold_state(
        [
            change("insert", "a", {"x": 1, "y": 2}),
            change("update", "a", {"x": 5}),  # merged: y stays
            change("insert", "b", {"n": 1}),
            change("insert", "b", {"m": 2}),  # an insert of a row there merges too
            change("upsert", "c", {"z": 0}),
            change("update", "d", {"w": 1}),  # an update of a missing row makes it
            change("delete", "c"),
            change("delete", "nothing"),
            control("snapshot-start"),
            control("snapshot-end"),
            change("insert", "a", {"x": 1}, kind="other"),  # another type: another row
            change("update", "e", [1, 2]),  # not an object: replaces
        ]
    )
    assert refused is None
    assert fold.state() == {
        ("row", "a"): {"x": 5, "y": 2},
        ("row", "b"): {"n": 1, "m": 2},
        ("row", "d"): {"w": 1},
        ("other", "a"): {"x": 1},
        ("row", "e"): [1, 2],
    }


def test_a_reset_clears_every_row() -> None:
    fold, _ = fold_state(
        [change("insert", "a", {"x": 1}), control("reset"), change("insert", "b", {})]
    )
    assert fold.state() == {("row", "b"): {}}


def test_the_snapshot_is_one_insert_per_row_in_the_order_rows_were_last_written() -> None:
    history = [
        change("insert", "a", {"x": 1}),
        change("insert", "b", {"x": 2}),
        json.dumps(
            {"type": "row", "key": "a", "value": {"x": 3}, "old_value": {"x": 1},
             "headers": {"operation": "update", "txid": "t1"}}
        ).encode(),
    ]  # fmt: skip
    fold, _ = fold_state(history)
    snapshot = [json.loads(m) for m in fold.snapshot()]
    assert snapshot == [
        {"headers": {"control": "snapshot-start"}},
        {"type": "row", "key": "b", "value": {"x": 2}, "headers": {"operation": "insert"}},
        {
            "type": "row",
            "key": "a",
            "value": {"x": 3},
            "headers": {"operation": "insert", "txid": "t1"},
        },
        {"headers": {"control": "snapshot-end"}},
    ]
    assert fold_state(list(fold.snapshot()))[0].state() == fold.state()


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"[1]", "not a JSON object"),
        (b"{", "not JSON"),
        (b'{"type":"a","key":"k","value":{}}', "no headers"),
        (b'{"headers":{"control":"pause"}}', "unknown control"),
        (b'{"headers":{}}', "neither a change nor a control"),
        (b'{"type":"a","key":"k","headers":{"operation":"frob"}}', "neither"),
        (b'{"type":1,"key":"k","value":{},"headers":{"operation":"insert"}}', "string type"),
        (b'{"type":"a","key":"k","headers":{"operation":"insert"}}', "needs a value"),
        (b'{"type":"a","key":"k","value":{"x":1e400},"headers":{"operation":"insert"}}', "range"),
        (b'{"type":"a","key":"k","value":{"x":NaN},"headers":{"operation":"insert"}}', "NaN"),
    ],
)
def test_anything_but_state_protocol_messages_is_refused_where_it_is(raw: bytes, why: str) -> None:
    fold, refused = fold_state([change("insert", "a", {}), raw, change("insert", "b", {})])
    assert refused is not None and refused.index == 1 and why in refused.reason
    assert not refused.too_large and fold.messages == 1


def test_a_refusal_quotes_nothing_of_the_stream() -> None:
    """The reason is shown to a token that may operate on the stream, not read it."""
    for secret in (
        b'{"headers":{"control":"api-key hunter2"}}',
        b'{"type":"a","key":"k","value":{"pin":31337e999},"headers":{"operation":"insert"}}',
    ):
        _, refused = fold_state([secret])
        assert refused is not None
        assert "hunter2" not in str(refused) and "31337" not in str(refused)


def test_a_lone_surrogate_is_carried_escaped() -> None:
    fold, refused = fold_state(
        [b'{"type":"a","key":"k","value":{"s":"\\ud800"},"headers":{"operation":"insert"}}']
    )
    assert refused is None
    assert b"\\ud800" in fold.snapshot()[1]


def test_a_state_past_the_limit_is_refused_as_it_grows() -> None:
    fold = StateFold(limit=500)
    refused = fold.fold(change("insert", f"k{n}", {"pad": "x" * 50}) for n in range(100))
    assert refused is not None and refused.too_large and refused.index < 10
    # Rows replaced or deleted do not count twice.
    fold = StateFold(limit=500)
    assert fold.fold(change("insert", "k", {"pad": "x" * 50}) for _ in range(100)) is None
    assert fold.fold([change("delete", "k")] + [change("insert", "j", {"p": "y" * 80})] * 3) is None


@pytest.mark.parametrize("seed", range(30))
def test_a_snapshot_folds_to_the_state_of_its_history(seed: int) -> None:
    rng = random.Random(seed)
    history = []
    for n in range(rng.randint(0, 200)):
        roll = rng.random()
        if roll < 0.03:
            history.append(control("reset"))
        elif roll < 0.06:
            history.append(control(rng.choice(["snapshot-start", "snapshot-end"])))
        else:
            operation = rng.choice(["insert", "update", "upsert", "delete"])
            value = None if operation == "delete" else {rng.choice("abc"): n}
            history.append(change(operation, f"k{rng.randrange(8)}", value, rng.choice("xy")))
    fold, refused = fold_state(history)
    assert refused is None
    # And a history after the snapshot folds on from it as from the history itself.
    later = [change("update", "k1", {"late": 1}, "x"), change("delete", "k2", None, "y")]
    assert (
        fold_state([*fold.snapshot(), *later])[0].state() == fold_state(history + later)[0].state()
    )
