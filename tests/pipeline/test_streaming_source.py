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


def string_schema() -> Any:
    """The source's schema reading text messages."""
    from pyspark.sql.types import StringType, StructField, StructType

    names = ("stream", "offset", "message", "content_type")
    return StructType([StructField(name, StringType()) for name in names])


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


def test_micro_batches_of_many_streams_are_packed_and_replay_the_same_rows(
    spark: Any, streams_url: str, tmp_path: Path
) -> None:
    from durable_streams_aws.pipeline import ReadOptions
    from durable_streams_aws.pipeline.streaming import StreamReader

    names = [f"fleet/{i}" for i in range(6)]
    for index, name in enumerate(names):
        append(f"{streams_url}/{name}", [{"n": index * 100 + n} for n in range(20)], create=True)
    options = {"streams": ",".join(names), "minPartitions": "2", "maxMessagesPerTrigger": "60"}
    settings = {"url": streams_url, **{k.lower(): v for k, v in options.items()}}
    reader = StreamReader(ReadOptions.parse(settings), settings, string_schema())
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    partitions = reader.partitions(start, end)
    assert len(partitions) == 2  # six streams' ranges in two partitions
    assert [p.stream for part in partitions for p in part.slices] == names

    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    assert spark_support.run(spark, streams_url, checkpoint, out, **options) == ([60, 60], None)
    (checkpoint / "commits" / "1").unlink()  # a crash before Spark recorded batch 1 as done
    (checkpoint / "commits" / ".1.crc").unlink()
    append(f"{streams_url}/{names[0]}", [{"n": 20}])  # since: not in the replay
    assert spark_support.run(spark, streams_url, checkpoint, out, **options)[1] is None
    kept = batches(out)
    assert kept["1-1"] == kept["1-0"]
    seen = sorted(v["n"] for name in ("0-0", "1-0", "2-0") for _, _, v in kept[name])
    assert seen == sorted([i * 100 + n for i in range(6) for n in range(20)] + [20])


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
    from durable_streams_aws.pipeline import ReadOptions
    from durable_streams_aws.pipeline.streaming import StreamReader

    url = f"{streams_url}/legacy"
    append(url, list(range(30)), create=True)
    options = ReadOptions.parse({"url": streams_url, "stream": "legacy"})
    reader = StreamReader(options, {}, string_schema())
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
