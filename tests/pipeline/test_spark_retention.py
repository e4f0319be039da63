"""The `durable_streams` source and streams whose retention policy drops data (issue 40): a
read at an offset below the earliest one kept (410 Gone with Stream-Earliest-Offset) is data
loss. Under `failOnDataLoss` (the default) the read fails naming the stream and the range
lost; with `failOnDataLoss=false` it reads on from the earliest offset kept, never past the end
of the range planned, so a micro-batch planned before the loss keeps its end.

The decisions are tested without Spark; then a batch read (over HTTP and from the store) and a
streaming query against `dsaws serve`, whose retention runs are simulated by moving the stream
item's retained start the way one records a cut (the cut itself is the server's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import spark_support
from spark_support import Served, batches

from durable_streams_aws.client import DurableStream, Offset, OffsetGone
from durable_streams_aws.core.protocol.offsets import format_offset, format_snapshot_offset
from durable_streams_aws.core.storage import ReadBatch
from durable_streams_aws.pipeline import (
    DataLoss,
    Origin,
    ReadOptions,
    StreamSlice,
    StreamState,
    _partitions,
    plan_slices,
)
from durable_streams_aws.pipeline._partitions import SlicePartition, read_slice
from durable_streams_aws.pipeline._plan import after_gone

URL = "http://127.0.0.1:1/v1/stream"
JSON = "application/json"


def token(position: int) -> str:
    return format_offset(position)


# -- The decision after a 410, without Spark ---------------------------------------------------


def test_under_fail_on_data_loss_a_410_fails_naming_the_stream_and_the_range() -> None:
    with pytest.raises(DataLoss) as raised:
        after_gone("orders", token(10), token(40), token(90), fail_on_data_loss=True)
    said = str(raised.value)
    assert "'orders'" in said and token(10) in said and token(40) in said
    assert "failOnDataLoss=false" in said


def test_without_it_the_read_goes_on_from_the_earliest_offset_up_to_its_end() -> None:
    skipped = after_gone("orders", token(10), token(40), token(90), fail_on_data_loss=False)
    assert skipped.resume == token(40)
    assert token(10) in str(skipped) and token(40) in str(skipped)  # the warning names both
    # The loss reaches the range's end, or past it: nothing of the range is left to read.
    assert after_gone("o", token(10), token(90), token(90), False).resume is None
    assert after_gone("o", token(10), token(95), token(90), False).resume is None
    # A compacted stream's earliest offset is its snapshot: rows (which carry offsets) go on
    # where the history after it does.
    assert after_gone("o", token(10), format_snapshot_offset(40), token(90), False).resume == (
        token(40)
    )
    # A server that calls an offset gone and kept at once would make the read loop.
    with pytest.raises(DataLoss, match="yet not before"):
        after_gone("o", token(40), token(40), token(90), False)


def test_planning_starts_at_the_earliest_offset_and_a_start_below_it_is_loss() -> None:
    state = {"a": StreamState(token(90), JSON, earliest=token(40))}
    fresh = ReadOptions.parse({"url": URL, "stream": "a"})
    # From the beginning: the earliest offset kept, which is no loss.
    assert plan_slices(fresh, state) == [StreamSlice("a", token(40), token(90), JSON)]
    below = {"url": URL, "stream": "a", "startingoffsets": json.dumps({"a": token(10)})}
    with pytest.raises(DataLoss, match=f"from {token(10)} up to {token(40)}"):
        plan_slices(ReadOptions.parse(below), state)
    read_on = ReadOptions.parse({**below, "failondataloss": "false"})
    assert plan_slices(read_on, state) == [StreamSlice("a", token(40), token(90), JSON)]
    ending = {**below, "failondataloss": "false", "endingoffsets": json.dumps({"a": token(30)})}
    assert plan_slices(ReadOptions.parse(ending), state) == []  # all of it dropped


class Retaining:
    """A stream of 10-byte JSON messages whose retained data starts at `start`, and moves on
    to `moves[p]` when a read reaches position p (a retention run between two requests)."""

    def __init__(self, start: int, moves: dict[int, int] | None = None) -> None:
        self.start, self.moves = start, moves or {}

    def read(self, piece: StreamSlice) -> Iterator[ReadBatch]:
        at, end = int(piece.start.split("_")[1]), int(piece.end.split("_")[1])
        while at < end:
            self.start = max(self.start, self.moves.get(at, 0))
            if at < self.start:
                earliest = Offset(token(self.start))
                raise OffsetGone("410", offset=Offset(token(at)), earliest_offset=earliest)
            yield ReadBatch(at, at + 10, messages=(b'{"n":"%02d"}' % (at // 10),))
            at += 10


def read(monkeypatch: pytest.MonkeyPatch, stream: Retaining, fail: bool) -> list[int]:
    monkeypatch.setattr(_partitions, "access", lambda origin: stream)
    piece = StreamSlice("s", token(0), token(60), JSON)
    partition = SlicePartition(Origin(URL), (piece,), True, None, fail)
    return [int(json.loads(row[2])["n"]) for row in read_slice(partition)]


def test_a_partition_reads_on_from_each_earliest_offset_and_stops_at_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Gone from its start (kept from 20), then again mid-read (kept from 50 once it is at 30).
    assert read(monkeypatch, Retaining(20, {30: 50}), fail=False) == [2, 5]
    with pytest.raises(DataLoss, match=f"'s': offsets from {token(0)} up to {token(20)}"):
        read(monkeypatch, Retaining(20), fail=True)
    with pytest.raises(DataLoss, match=f"'s': offsets from {token(30)} up to {token(50)}"):
        read(monkeypatch, Retaining(0, {30: 50}), fail=True)
    assert read(monkeypatch, Retaining(70), fail=False) == []  # dropped past the range's end


def test_a_direct_read_below_the_retained_start_is_gone_as_over_http() -> None:
    from durable_streams_aws.core.storage.model import Retained, StreamInfo
    from durable_streams_aws.pipeline._access import StorageAccess

    info = StreamInfo(
        path="s",
        incarnation="i1",
        content_type=JSON,
        tail=90,
        closed=False,
        closed_by=None,
        last_stream_seq=None,
        ttl_seconds=None,
        expires_at=None,
        last_access=0.0,
        created_at=0.0,
    )
    direct = object.__new__(StorageAccess)  # no AWS clients: the store below is all it reads
    direct.store = type("Store", (), {"get": lambda self, path: info})()
    assert direct.state("s") == StreamState(token(90), JSON, None)
    info = replace(info, retained=Retained(40))
    assert direct.state("s") == StreamState(token(90), JSON, token(40))
    with pytest.raises(OffsetGone) as gone:
        next(direct.read(StreamSlice("s", token(10), token(90), JSON)))
    assert gone.value.offset == Offset(token(10))
    assert gone.value.earliest_offset == Offset(token(40))


# -- With Spark, against dsaws serve -----------------------------------------------------------

MESSAGE = 8  # bytes of each message below: {"n":10} .. {"n":99}


def make(url: str, numbers: range, create: bool = True) -> None:
    with DurableStream(url) as stream:
        if create:
            stream.create(JSON)
        stream.append([{"n": n} for n in numbers])


def cut(served: Served, stream: str, messages: int) -> None:
    """What a retention run leaves: the stream's retained data starts after `messages`."""
    from durable_streams_aws.core.storage._items import encode_retained, stream_key
    from durable_streams_aws.core.storage.aws import AwsSettings, make_clients
    from durable_streams_aws.core.storage.model import Retained

    dynamodb, _ = make_clients(AwsSettings("us-east-1", served.endpoint, served.endpoint))
    retained = encode_retained(Retained(messages * MESSAGE))
    dynamodb.update_item(
        TableName=served.table,
        Key=stream_key(stream),
        UpdateExpression="SET " + ", ".join(f"{name} = :{name}" for name in retained),
        ExpressionAttributeValues={f":{name}": value for name, value in retained.items()},
    )


@pytest.mark.integration
@pytest.mark.spark
def test_a_batch_read_below_retention_fails_or_reads_on(spark: Any, served: Served) -> None:
    make(f"{served.url}/kept/batch", range(10, 40))
    cut(served, "kept/batch", 12)
    with DurableStream(f"{served.url}/kept/batch") as stream, pytest.raises(OffsetGone):
        next(iter(stream.read(Offset(token(0)))))  # the server does answer 410 below it
    below = json.dumps({"kept/batch": token(5 * MESSAGE)})
    for origin in ({"url": served.url}, served.store_options):
        assert spark_read(spark, origin) == list(range(22, 40))  # from the earliest kept
        with pytest.raises(Exception, match=f"from {token(5 * MESSAGE)} up to {token(96)}"):
            spark_read(spark, origin, startingOffsets=below)
        read_on = spark_read(spark, origin, startingOffsets=below, failOnDataLoss="false")
        assert read_on == list(range(22, 40))


def spark_read(spark: Any, origin: dict[str, str], **options: str) -> list[int]:
    reader = spark.read.format("durable_streams").option("stream", "kept/batch")
    for name, value in {**origin, **options}.items():
        reader = reader.option(name, value)
    return sorted(json.loads(row.message)["n"] for row in reader.load().collect())


@pytest.mark.integration
@pytest.mark.spark
def test_a_streaming_query_fails_or_reads_on_keeping_its_batches_ends(
    spark: Any, served: Served, tmp_path: Path
) -> None:
    for name in ("fails", "reads-on"):
        make(f"{served.url}/kept/{name}", range(10, 40))

    def run(stream: str, name: str, on_batch: Any = None, **options: str) -> Any:
        return spark_support.run(
            spark,
            served.url,
            tmp_path / f"{name}-checkpoint",
            tmp_path / f"{name}-out",
            on_batch,
            stream=stream,
            maxMessagesPerTrigger="10",
            **options,
        )

    # Dropped while the query runs, below where it stands: the next batch fails, saying so.
    _, error = run("kept/fails", "fails", lambda batch: cut(served, "kept/fails", 15))
    assert error is not None
    assert "'kept/fails'" in str(error) and f"from {token(10 * MESSAGE)} up to" in str(error)

    # failOnDataLoss=false: batch 1 goes on from the earliest offset kept (n 25..34).
    def drop(batch: int) -> None:
        if batch == 0:
            cut(served, "kept/reads-on", 15)

    sizes, error = run("kept/reads-on", "reads-on", drop, failOnDataLoss="false")
    assert error is None, error
    assert sizes == [10, 10, 5]
    out = tmp_path / "reads-on-out"
    seen = [[value["n"] for _, _, value in rows] for rows in batches(out).values()]
    assert seen == [list(range(10, 20)), list(range(25, 35)), list(range(35, 40))]

    # A crash before batch 2 was recorded as done, then retention drops past its end (40 n):
    # its replay keeps the end it was planned with, reads nothing, and the next batch goes on
    # from the earliest offset kept.
    checkpoint = tmp_path / "reads-on-checkpoint"
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink()
    make(f"{served.url}/kept/reads-on", range(40, 50), create=False)
    cut(served, "kept/reads-on", 33)
    sizes, error = run("kept/reads-on", "reads-on", failOnDataLoss="false")
    assert error is None, error
    kept = batches(out)
    assert kept["2-1"] == []
    assert [value["n"] for _, _, value in kept["3-0"]] == list(range(43, 50))
