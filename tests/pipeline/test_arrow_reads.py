"""Reads reach Spark as Arrow record batches, with the rows the Python path reads: a
micro-batch replayed after a crash reads exactly the rows it read the first time, parsed
messages (`jsonSchema`) included, and a batch read returns what the partitions read by hand
(message by message, in Python) return."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durable_streams_aws.client import DurableStream

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SCHEMA = "n BIGINT, price DOUBLE, name STRING, tags ARRAY<STRING>, inner STRUCT<x: INT>"
ODD = [None, [1], {"n": 1.5}, {"n": "7"}, {"price": "x"}, {"name": 5}, {"inner": [1]}]


def messages(first: int, count: int) -> list[Any]:
    """Mostly messages that fit, every 25th one that does not (its batch parses in Python)."""
    return [
        ODD[n % len(ODD)]
        if n % 25 == 24
        else {"n": n, "price": n / 4, "name": f"é{n}\n", "tags": ["a"], "inner": {"x": n}}
        for n in range(first, first + count)
    ]


def append(url: str, values: list[Any], create: bool = False) -> None:
    with DurableStream(url) as stream:
        if create:
            stream.create("application/json")
        stream.append(values)


def run(spark: Any, streams_url: str, checkpoint: Path, out: Path) -> None:
    out.mkdir(exist_ok=True)

    def keep(frame: Any, batch_id: int) -> None:
        attempt = len(list(out.glob(f"{batch_id}-*.json")))
        found = [
            [r.offset, r.message, r.value.asDict(recursive=True) if r.value else None]
            for r in frame.collect()
        ]
        (out / f"{batch_id}-{attempt}.json").write_text(json.dumps(sorted(found, key=str)))

    query = (
        spark.readStream.format("durable_streams")
        .option("url", streams_url)
        .option("stream", "arrow-replay")
        .option("jsonSchema", SCHEMA)
        .option("maxMessagesPerTrigger", "60")
        .load()
        .writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()


def test_a_replayed_micro_batch_reads_the_same_rows(
    spark: Any, streams_url: str, tmp_path: Path
) -> None:
    url = f"{streams_url}/arrow-replay"
    append(url, messages(0, 150), create=True)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    run(spark, streams_url, checkpoint, out)
    last = max(int(p.stem.split("-")[0]) for p in out.glob("*.json"))
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink()
    append(url, messages(150, 10))  # appended since: not in the replay
    run(spark, streams_url, checkpoint, out)
    first, again = (json.loads((out / f"{last}-{n}.json").read_text()) for n in (0, 1))
    assert again == first and len(first) == 30  # 60, 60, then the last 30
    values = [value for _, _, value in first]
    assert {"n": 148, "price": 37.0, "name": "é148\n", "tags": ["a"], "inner": {"x": 148}} in values
    # Messages 124 and 149 do not fit: a STRING keeps a number's text, a fraction is no BIGINT.
    assert {"n": None, "price": None, "name": "5", "tags": None, "inner": None} in values
    assert {"n": None, "price": None, "name": None, "tags": None, "inner": None} in values


def test_spark_reads_arrow_batches_holding_the_python_rows(spark: Any, streams_url: str) -> None:
    from durable_streams_aws.pipeline import ReadOptions
    from durable_streams_aws.pipeline._partitions import read_partition
    from durable_streams_aws.pipeline.source import BatchReader

    url = f"{streams_url}/arrow-batch"
    append(url, messages(0, 100), create=True)
    frame = (
        spark.read.format("durable_streams")
        .option("url", streams_url)
        .option("stream", "arrow-batch")
        .option("jsonSchema", SCHEMA)
        .load()
    )
    through_spark = [tuple(row) for row in frame.collect()]
    options = ReadOptions.parse({"url": streams_url, "stream": "arrow-batch"})
    reader = BatchReader(options, frame.schema)
    partitions = reader.partitions()
    by_hand = [row for partition in partitions for row in reader.read(partition)]  # no task
    assert through_spark == by_hand and len(by_hand) == 100
    kinds = (
        spark.sparkContext.parallelize(partitions, len(partitions))
        .map(lambda p: type(next(read_partition(p))).__name__)
        .collect()
    )
    assert kinds == ["RecordBatch"] * len(partitions)  # what a task hands Spark
