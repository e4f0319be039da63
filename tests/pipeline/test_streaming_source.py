"""The `durable_streams` source under Structured Streaming, against `dsaws serve`: admission
control, a query stopped and restarted from its checkpoint neither skips nor repeats a message,
and a micro-batch replayed after a crash reads exactly the rows it read the first time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import spark_support
from spark_support import batches

from durable_streams_aws.client import DurableStream

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def append(url: str, values: list[Any], create: bool = False) -> None:
    with DurableStream(url) as stream:
        if create:
            stream.create("application/json")
        stream.append(values)


def run(
    spark: Any, streams_url: str, stream: str, checkpoint: Path, out: Path, **options: str
) -> list[int]:
    sizes, error = spark_support.run(spark, streams_url, checkpoint, out, stream=stream, **options)
    assert error is None, error
    return sizes


def test_admission_restart_and_replay(spark: Any, streams_url: str, tmp_path: Path) -> None:
    url = f"{streams_url}/clicks"
    append(url, [{"n": n} for n in range(100)], create=True)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

    sizes = run(spark, streams_url, "clicks", checkpoint, out, maxMessagesPerTrigger="40")
    assert sizes == [40, 40, 20]

    append(url, [{"n": n} for n in range(100, 130)])  # more, while the query is stopped
    run(spark, streams_url, "clicks", checkpoint, out, maxMessagesPerTrigger="40")
    seen = [value["n"] for rows in batches(out).values() for _, _, value in rows]
    assert seen == list(range(130))  # neither skipped nor repeated, in order

    # A crash after the last batch ran and before Spark recorded it as done: it runs again.
    last = max(int(name.split("-")[0]) for name in batches(out))
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink()
    append(url, [{"n": n} for n in range(130, 140)])  # appended since: not in the replay
    run(spark, streams_url, "clicks", checkpoint, out, maxMessagesPerTrigger="40")
    kept = batches(out)
    assert kept[f"{last}-1"] == kept[f"{last}-0"]  # the replay read exactly the same rows
    later = [
        v["n"] for name, rows in kept.items() if int(name.split("-")[0]) > last for _, _, v in rows
    ]
    assert later == list(range(130, 140))


def test_bytes_per_trigger_and_an_empty_stream(
    spark: Any, streams_url: str, tmp_path: Path
) -> None:
    url = f"{streams_url}/sized"
    append(url, [{"pad": "x" * 90} for _ in range(10)], create=True)  # about 100 B each
    with DurableStream(f"{streams_url}/empty") as stream:
        stream.create("application/json")
    out = tmp_path / "out"
    sizes = run(spark, streams_url, "sized", tmp_path / "ck", out, maxBytesPerTrigger="350")
    assert sizes == [3, 3, 3, 1]
    empty = run(
        spark,
        streams_url,
        "empty",
        tmp_path / "ck2",
        tmp_path / "out",
    )
    assert sum(empty) == 0


def test_the_reader_also_answers_spark_4_0_which_passes_no_start(streams_url: str) -> None:
    """Spark 4.0 and 4.1 call latestOffset() with no arguments (4.2 added the start and the
    read limit): the reader carries on from the end it returned last."""
    from pyspark.sql.types import StringType, StructField, StructType

    from durable_streams_aws.pipeline import ReadOptions
    from durable_streams_aws.pipeline.streaming import StreamReader

    url = f"{streams_url}/legacy"
    append(url, list(range(30)), create=True)
    schema = StructType(
        [
            StructField(name, StringType())
            for name in ("stream", "offset", "message", "content_type")
        ]
    )
    reader = StreamReader(ReadOptions.parse({"url": streams_url, "stream": "legacy"}), {}, schema)
    start = reader.initialOffset()
    first = reader.latestOffset()
    append(url, list(range(30, 35)))
    second = reader.latestOffset()
    assert first != second and reader.latestOffset() == second
    read = [
        json.loads(row[2])
        for part in (reader.partitions(start, first), reader.partitions(first, second))
        for partition in part
        for row in reader.read(partition)
    ]
    assert read == list(range(35))
