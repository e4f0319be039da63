"""The `durable_streams` source and a compacted stream's snapshot (issue 40): a read from the
beginning (batch `startingOffsets` earliest, "-1" or the snapshot's token, a streaming query's
first micro-batch) returns the snapshot's messages first, each row carrying the snapshot's
token (`..._s`) as its offset, then the history after it, so that folding the rows in offset
order gives the whole state. A micro-batch that starts at the token holds the snapshot (alone
when its budget is small) and reads it again when replayed; once a later compaction replaced
it, the token is gone like any dropped offset (failOnDataLoss).

The plan without Spark; then batch reads over HTTP and from the store, and a streaming query,
against `dsaws serve`, of a stream sealed and compacted in-process on the server's storage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import spark_support
from spark_support import Served, batches

from durable_streams_aws.client import DurableStream
from durable_streams_aws.core.protocol.compaction import fold_state
from durable_streams_aws.core.protocol.offsets import format_offset, format_snapshot_offset
from durable_streams_aws.pipeline import (
    OptionError,
    ReadOptions,
    StreamSlice,
    StreamState,
    plan_slices,
)
from durable_streams_aws.pipeline._plan import FIRST, after_gone

URL = "http://127.0.0.1:1/v1/stream"
JSON = "application/json"
SNAP = format_snapshot_offset(40)


def token(position: int) -> str:
    return format_offset(position)


# -- Planning, without Spark -------------------------------------------------------------------


def test_a_read_from_the_beginning_of_a_compacted_stream_starts_at_its_snapshot() -> None:
    state = {"a": StreamState(token(90), JSON, earliest=SNAP)}
    for start in ({}, {"startingoffsets": json.dumps({"a": "-1"})}):
        options = ReadOptions.parse({"url": URL, "stream": "a", **start})
        assert plan_slices(options, state) == [StreamSlice("a", SNAP, token(90), JSON)]
    # The token itself is a starting offset; a range up to where the history goes on holds
    # the snapshot alone; a token names no position to end at.
    at_snapshot = {"url": URL, "stream": "a", "startingoffsets": json.dumps({"a": SNAP})}
    only = ReadOptions.parse({**at_snapshot, "endingoffsets": json.dumps({"a": token(40)})})
    assert plan_slices(only, state) == [StreamSlice("a", SNAP, token(40), JSON)]
    with pytest.raises(OptionError, match="snapshot"):
        ReadOptions.parse({**at_snapshot, "endingoffsets": json.dumps({"a": SNAP})})
    # A later compaction replaced the snapshot: its token is gone (loss), and a read from the
    # beginning reads on from the new snapshot; one from a plain offset after it, as before.
    later = {"a": StreamState(token(90), JSON, earliest=format_snapshot_offset(60))}
    with pytest.raises(Exception, match=f"from {SNAP} up to"):
        plan_slices(ReadOptions.parse(at_snapshot), later)
    read_on = ReadOptions.parse({**at_snapshot, "failondataloss": "false"})
    assert plan_slices(read_on, later)[0].start == format_snapshot_offset(60)
    assert after_gone("a", FIRST, SNAP, token(90), False).resume == SNAP
    assert after_gone("a", token(20), SNAP, token(90), False).resume == token(40)
    assert after_gone("a", SNAP, format_snapshot_offset(95), token(90), False).resume is None


# -- With Spark, against dsaws serve -----------------------------------------------------------


def change(kind: str, key: str, value: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "row", "key": key, "headers": {"operation": kind}}
    if kind != "delete":
        message["value"] = value
    return message


def history(first: int, count: int) -> list[dict[str, Any]]:
    """Changes n = first.. of keys k0..k5: each key's first change an insert, then updates,
    every seventh a delete (the next change of that key inserts it again)."""
    out, live = [], {f"k{n % 6}" for n in range(min(first, 6))}
    for n in range(first, first + count):
        key = f"k{n % 6}"
        if key not in live:
            out.append(change("insert", key, {"v": n}))
            live.add(key)
        elif n % 7 == 0:
            out.append(change("delete", key))
            live.discard(key)
        else:
            out.append(change("update", key, {"v": n}))
    return out


def append(url: str, messages: list[dict[str, Any]], create: bool = False) -> None:
    with DurableStream(url) as stream:
        if create:
            stream.create(JSON, retention="compact")
        for at in range(0, len(messages), 4):
            stream.append(messages[at : at + 4])


def compact(served: Served, path: str) -> str:
    """Seal the stream and compact it now (on the storage the server uses): its snapshot's
    token, as the server's HEAD names it."""
    from durable_streams_aws.core.storage import DynamoStore, Sealer, SealPolicy
    from durable_streams_aws.core.storage.aws import AwsSettings, make_clients
    from durable_streams_aws.core.storage.retention import RetentionRun

    dynamodb, s3 = make_clients(AwsSettings("us-east-1", served.endpoint, served.endpoint))
    store = DynamoStore(dynamodb, s3, served.table, served.bucket)
    Sealer(store, SealPolicy(segment_bytes=2000, hot_bytes=0, page_bytes=500)).seal(path)
    for _ in range(2):  # the first records a cut already in effect, if any
        if RetentionRun(store, delay=0, compaction_min_bytes=1).run().cuts_announced:
            break
    else:
        raise AssertionError("no compaction")
    with DurableStream(f"{served.url}/{path}") as stream:
        earliest = stream.head().earliest_offset
    assert earliest is not None and earliest.token.endswith("_s")
    return earliest.token


def folded(messages: list[Any]) -> dict[Any, Any]:
    state, refusal = fold_state(json.dumps(m, separators=(",", ":")).encode() for m in messages)
    assert refusal is None
    return state.state()


def spark_rows(spark: Any, stream: str, **options: str) -> list[tuple[str, Any]]:
    reader = spark.read.format("durable_streams").option("stream", stream)
    for name, value in options.items():
        reader = reader.option(name, value)
    return [(row.offset, json.loads(row.message)) for row in reader.load().collect()]


def check_snapshot_first(rows: list[tuple[str, Any]], snapshot: str, history: list[Any]) -> None:
    """The snapshot's rows carry its token; the history after it follows in offset order;
    folded, they give the state of the whole history."""
    ours = [message for offset, message in rows if offset == snapshot]
    assert ours[0] == {"headers": {"control": "snapshot-start"}}
    assert ours[-1] == {"headers": {"control": "snapshot-end"}}
    after = sorted((offset, m) for offset, m in rows if offset != snapshot)
    assert all(offset > snapshot for offset, _ in after)
    assert folded(ours + [m for _, m in after]) == folded(history)


@pytest.mark.integration
@pytest.mark.spark
def test_a_batch_read_from_the_beginning_reads_the_snapshot_first(
    spark: Any, served: Served
) -> None:
    stream = "snap/batch"
    before, after = history(0, 24), history(24, 8)
    append(f"{served.url}/{stream}", before, create=True)
    snapshot = compact(served, stream)
    append(f"{served.url}/{stream}", after)
    origins = [
        {"url": served.url},
        served.store_options,
        {**served.store_options, "bytesPerPartition": "40"},  # the snapshot's part, then more
    ]
    for origin in origins:
        rows = spark_rows(spark, stream, **origin)
        check_snapshot_first(rows, snapshot, before + after)
        assert len(rows) > len(after)
    at_token = spark_rows(
        spark, stream, url=served.url, startingOffsets=json.dumps({stream: snapshot})
    )
    assert at_token == spark_rows(spark, stream, url=served.url)  # one partition, in order

    # Compacted again: the first snapshot's token is gone; read on from the new snapshot.
    newer = compact(served, stream)
    assert newer > snapshot
    start = json.dumps({stream: snapshot})
    for origin in ({"url": served.url}, served.store_options):
        with pytest.raises(Exception, match=f"from {snapshot} up to {newer}"):
            spark_rows(spark, stream, startingOffsets=start, **origin)
        rows = spark_rows(spark, stream, startingOffsets=start, failOnDataLoss="false", **origin)
        check_snapshot_first(rows, newer, before + after)


@pytest.mark.integration
@pytest.mark.spark
def test_a_streaming_query_reads_the_snapshot_first_and_replays_it(
    spark: Any, served: Served, tmp_path: Path
) -> None:
    stream = "snap/streaming"
    before, after = history(0, 24), history(24, 6)
    append(f"{served.url}/{stream}", before, create=True)
    snapshot = compact(served, stream)

    def run() -> list[int]:
        sizes, error = spark_support.run(
            spark,
            served.url,
            tmp_path / "checkpoint",
            tmp_path / "out",
            stream=stream,
            maxMessagesPerTrigger="2",
        )
        assert error is None, error
        return sizes

    # The first micro-batch is the snapshot, whole (a budget of 2 rows moves on by a snapshot).
    assert len(run()) == 1
    first = batches(tmp_path / "out")["0-0"]
    assert {offset for _, offset, _ in first} == {snapshot}
    # Its replay (a crash before its commit) reads the same rows; later batches the history.
    (tmp_path / "checkpoint" / "commits" / "0").unlink()
    (tmp_path / "checkpoint" / "commits" / ".0.crc").unlink()
    append(f"{served.url}/{stream}", after)
    assert run() == [len(first), 2, 2, 2]
    kept = batches(tmp_path / "out")
    assert kept["0-1"] == first
    rows = [
        (offset, message)
        for name in ("0-0", "1-0", "2-0", "3-0")
        for _, offset, message in kept[name]
    ]
    check_snapshot_first(rows, snapshot, before + after)
