"""The `durable_streams` sink against `dsaws serve`: exactly once, including the micro-batch
that Spark runs again after a crash between the sink's write and the checkpoint's commit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durable_streams_aws.client import DurableStream

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def create(url: str, content_type: str = "application/json") -> None:
    with DurableStream(url) as stream:
        stream.create(content_type)


def messages(url: str) -> list[Any]:
    with DurableStream(url) as stream:
        return [m for batch in stream.read() for m in batch.messages or []]


def copy(spark: Any, base: str, source: str, target: str, checkpoint: Path) -> None:
    """One AvailableNow run of a query that copies stream `source` into `target`."""
    query = (
        spark.readStream.format("durable_streams")
        .option("url", base)
        .option("stream", source)
        .option("maxMessagesPerTrigger", "30")
        .load()
        .select("message")
        .writeStream.format("durable_streams")
        .option("url", base)
        .option("stream", target)
        .option("sinkId", "copier")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()


def test_a_crash_between_write_and_commit_writes_nothing_twice(
    spark: Any, streams_url: str, tmp_path: Path
) -> None:
    source, target = f"{streams_url}/sink-in", f"{streams_url}/sink-out"
    create(source)
    create(target)
    with DurableStream(source) as stream:
        stream.append([{"n": n} for n in range(100)])
    checkpoint = tmp_path / "checkpoint"
    copy(spark, streams_url, "sink-in", "sink-out", checkpoint)
    assert messages(target) == [{"n": n} for n in range(100)]

    # The crash: the last micro-batch was written to the stream, but its commit was not
    # recorded. On restart Spark runs it again, with the same data under the same epoch.
    commits = checkpoint / "commits"
    last = max(int(path.name) for path in commits.iterdir() if path.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink()
    copy(spark, streams_url, "sink-in", "sink-out", checkpoint)
    assert sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())[-1] == last
    assert messages(target) == [{"n": n} for n in range(100)]  # the replay was deduplicated

    with DurableStream(source) as stream:
        stream.append([{"n": n} for n in range(100, 120)])
    copy(spark, streams_url, "sink-in", "sink-out", checkpoint)
    assert messages(target) == [{"n": n} for n in range(120)]


def test_a_batch_write_is_idempotent_per_epoch(spark: Any, streams_url: str) -> None:
    url = f"{streams_url}/sink-batch"
    create(url)
    frame = spark.createDataFrame([(json.dumps({"n": n}),) for n in range(50)], "message STRING")

    def write(**options: str) -> None:
        writer = frame.coalesce(1).write.format("durable_streams").mode("append")
        for name, value in {"url": streams_url, "stream": "sink-batch", **options}.items():
            writer = writer.option(name, value)
        writer.save()

    write(sinkId="loader")
    write(sinkId="loader")  # the same job again: nothing new
    assert messages(url) == [{"n": n} for n in range(50)]
    write(sinkId="loader", epoch="1")  # a new run of the job
    assert len(messages(url)) == 100


def test_a_text_stream_takes_the_messages_as_they_are(spark: Any, streams_url: str) -> None:
    url = f"{streams_url}/sink-text"
    create(url, "text/plain")
    frame = spark.createDataFrame([("héllo ",), ("wörld",)], "message STRING").coalesce(1)
    frame.write.format("durable_streams").mode("append").option("url", streams_url).option(
        "stream", "sink-text"
    ).option("sinkId", "t").save()
    with DurableStream(url) as stream:
        assert b"".join(b.data for b in stream.read()).decode() == "héllo wörld"


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"stream": "sink-text"}, "sinkId"),
        ({"stream": "sink-text", "sinkId": "a/b"}, "sinkId"),
        ({"sinkId": "x"}, "'url'"),
        ({"stream": "sink-text", "sinkId": "x", "epoch": "-1"}, "epoch"),
    ],
)
def test_sink_options_that_cannot_work_say_why(
    spark: Any, streams_url: str, options: dict[str, str], complaint: str
) -> None:
    frame = spark.createDataFrame([("x",)], "message STRING")
    writer = frame.write.format("durable_streams").mode("append").option("url", streams_url)
    for name, value in options.items():
        writer = writer.option(name, value)
    with pytest.raises(Exception, match=complaint):
        writer.save()


def test_a_byte_stream_takes_binary_messages_byte_for_byte(spark: Any, streams_url: str) -> None:
    url = f"{streams_url}/sink-bytes"
    create(url, "application/octet-stream")
    pieces = [bytes(range(256)), b"\x00\r\n", b"\xff" * 3]
    frame = spark.createDataFrame([(p,) for p in pieces], "message BINARY").coalesce(1)
    frame.write.format("durable_streams").mode("append").option("url", streams_url).option(
        "stream", "sink-bytes"
    ).option("sinkId", "b").save()
    with DurableStream(url) as stream:
        assert b"".join(b.data for b in stream.read()) == b"".join(pieces)


def test_a_message_that_is_not_json_fails_the_write_and_sends_nothing_of_its_batch(
    spark: Any, streams_url: str
) -> None:
    url = f"{streams_url}/sink-not-json"
    create(url)
    rows = [('{"n": 1}',), ("{not json",), ('{"n": 3}',), (None,)]
    frame = spark.createDataFrame(rows, "message STRING").coalesce(1)
    writer = frame.write.format("durable_streams").mode("append").option("url", streams_url)
    with pytest.raises(Exception, match="message 1 of a batch is not a JSON text"):
        writer.option("stream", "sink-not-json").option("sinkId", "j").save()
    assert messages(url) == []
