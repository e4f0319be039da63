"""Batch reads through the `durable_streams` data source, against `dsaws serve`: what Spark
reads is exactly what was appended, with each message's own offset, over the planned range."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable_streams_aws.client import DurableStream, Offset

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def create(url: str, content_type: str, appends: list[Any]) -> list[Offset]:
    offsets = []
    with DurableStream(url) as stream:
        stream.create(content_type)
        for data in appends:
            offsets.append(stream.append(data))
    return offsets


def load(spark: Any, streams_url: str, **options: str) -> Any:
    reader = spark.read.format("durable_streams").option("url", streams_url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_a_json_stream_reads_back_message_by_message(spark: Any, streams_url: str) -> None:
    appends = [
        [{"n": n, "text": "ünïcode" * (n % 3)} for n in range(k, k + 50)] for k in (0, 50, 100)
    ]
    ends = create(f"{streams_url}/orders", "application/json", appends)
    frame = load(spark, streams_url, stream="orders")
    assert [f.name for f in frame.schema.fields] == ["stream", "offset", "message", "content_type"]
    rows = frame.collect()
    assert [json.loads(row.message) for row in rows] == [m for batch in appends for m in batch]
    assert {row.stream for row in rows} == {"orders"}
    offsets = [row.offset for row in rows]
    assert offsets == sorted(offsets) and len(set(offsets)) == 150
    assert offsets[49] == ends[0].token and offsets[-1] == ends[-1].token
    with DurableStream(f"{streams_url}/orders") as stream:  # each offset is after its message
        first = [m for b in stream.read(until=Offset(offsets[9])) for m in b.messages or []]
    assert first == appends[0][:10]


def test_streams_of_several_kinds_read_as_bytes(spark: Any, streams_url: str) -> None:
    create(f"{streams_url}/events", "application/json", [[1, 2], ["three"]])
    payload = bytes(range(256)) * 40
    create(f"{streams_url}/blobs", "application/octet-stream", [payload[:5000], payload[5000:]])
    frame = load(spark, streams_url, streams="events, blobs", minPartitions="2")
    assert frame.schema["message"].dataType.typeName() == "binary"
    rows = frame.collect()
    events = [json.loads(bytes(r.message)) for r in rows if r.stream == "events"]
    blobs = b"".join(bytes(r.message) for r in rows if r.stream == "blobs")
    assert events == [1, 2, "three"] and blobs == payload
    assert frame.rdd.getNumPartitions() == 2  # two small streams, two partitions: one each


def test_small_streams_are_read_together_each_row_once(spark: Any, streams_url: str) -> None:
    names = [f"many/{i}" for i in range(7)]
    for index, name in enumerate(names):
        create(f"{streams_url}/{name}", "application/json", [[index * 100 + n for n in range(30)]])
    streams = ",".join(names)
    packed = load(spark, streams_url, streams=streams, minPartitions="2")
    apart = load(spark, streams_url, streams=streams, minPartitions="7")
    assert packed.rdd.getNumPartitions() == 2 and apart.rdd.getNumPartitions() == 7
    # Each partition reads its streams whole, one after another, in the streams' order.
    by_partition = packed.rdd.glom().map(lambda rows: [r.stream for r in rows]).collect()
    assert [s for part in by_partition for s in dict.fromkeys(part)] == names
    rows = [(r.stream, r.offset, json.loads(r.message)) for r in packed.collect()]
    assert sorted(rows) == sorted(
        (r.stream, r.offset, json.loads(r.message)) for r in apart.collect()
    )
    for index, name in enumerate(names):
        mine = [value for stream, _, value in rows if stream == name]
        assert mine == [index * 100 + n for n in range(30)]


def test_starting_and_ending_offsets_bound_the_read(spark: Any, streams_url: str) -> None:
    ends = create(f"{streams_url}/ranged", "text/plain", ["one ", "two ", "three ", "four"])
    bounds = json.dumps({"ranged": ends[0].token})
    until = json.dumps({"ranged": ends[2].token})
    frame = load(spark, streams_url, stream="ranged", startingOffsets=bounds, endingOffsets=until)
    assert "".join(row.message for row in frame.collect()) == "two three "


def test_every_action_on_a_loaded_frame_reads_the_same_range(spark: Any, streams_url: str) -> None:
    create(f"{streams_url}/fixed", "application/json", [[1, 2, 3]])
    frame = load(spark, streams_url, stream="fixed")
    with DurableStream(f"{streams_url}/fixed") as stream:
        stream.append([4, 5])  # after the frame was loaded: not part of it
    assert frame.count() == 3
    assert [json.loads(row.message) for row in frame.collect()] == [1, 2, 3]
    assert load(spark, streams_url, stream="fixed").count() == 5  # a frame loaded now


def test_a_schema_given_by_the_user_reads_up_to_the_tail_when_planned(
    spark: Any, streams_url: str
) -> None:
    create(f"{streams_url}/given", "text/plain", ["a"])
    schema = "stream STRING, offset STRING, message STRING, content_type STRING"
    reader = spark.read.format("durable_streams").option("url", streams_url)
    frame = reader.option("stream", "given").schema(schema).load()
    with DurableStream(f"{streams_url}/given") as stream:
        stream.append("b")
    assert "".join(row.message for row in frame.collect()) == "ab"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stream": "x"}, "url"),
        ({"url": "ftp://nope"}, "url"),
        ({}, "stream"),
        ({"stream": "x", "startingOffsets": "[1]"}, "startingOffsets"),
        ({"stream": "x", "endingOffsets": '{"y": "-1"}'}, "not read"),
        ({"stream": "missing"}, "'missing' does not exist"),
        ({"stream": "x", "jsonSchema": "id INT"}, "JSON streams only"),
    ],
)
def test_bad_options_are_refused_with_a_clear_message(
    spark: Any, streams_url: str, options: dict[str, str], message: str
) -> None:
    create(f"{streams_url}/x", "text/plain", [])
    reader = spark.read.format("durable_streams")
    if "url" not in options and message != "url":
        reader = reader.option("url", streams_url)
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception, match=message):
        reader.load().collect()
