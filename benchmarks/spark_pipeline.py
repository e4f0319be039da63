"""The Spark pipeline's throughput on local Spark: rows per second read through the
`durable_streams` source (over HTTP, and straight from the store) and written by its sink.

    python3 -m benchmarks.spark_pipeline              # 100k messages of about 100 bytes
    python3 -m benchmarks.spark_pipeline --against-file-source   # and Spark's own JSON reader

The streams are served by `dsaws serve --aws` on an emulator in a process of its own (which
counts the AWS calls each path makes). Spark's startup (the JVM, the session, a first job) is
timed apart from the runs. Every run checks what it read or wrote.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks._processes import counted_emulator, dsaws_serve
from benchmarks._report import print_table
from durable_streams_aws.client import DurableStream, SyncIdempotentProducer
from durable_streams_aws.core.runtime import use_emulator_credentials

STREAMS = ("bench/a", "bench/b")  # two streams: one partition each on local[2]
TABLE, BUCKET = "pipeline-bench", "pipeline-bench-data"
JSON_SCHEMA = "n BIGINT, kind STRING, page STRING, pad STRING"  # the fields of `message`


@dataclass(frozen=True)
class Result:
    path: str
    rows: int
    seconds: list[float]
    aws_calls: int | None

    @property
    def per_second(self) -> float:
        return self.rows / statistics.median(self.seconds)

    def row(self) -> list[str]:
        runs = ", ".join(f"{s:.1f}" for s in self.seconds)
        calls = "-" if self.aws_calls is None else f"{self.aws_calls * 1000 / self.rows:.2f}"
        return [self.path, f"{self.rows:,}", runs, f"{self.per_second:,.0f}", calls]


def message(n: int) -> dict[str, Any]:
    """About 100 bytes of JSON."""
    return {"n": n, "kind": "click", "page": f"/products/{n % 997:04d}", "pad": "x" * 40}


def fill(url: str, count: int) -> None:
    """`count` messages, split between the streams, written by the idempotent producer."""
    for index, stream in enumerate(STREAMS):
        with DurableStream(f"{url}/{stream}") as handle:
            handle.create("application/json")
        producer = SyncIdempotentProducer(f"{url}/{stream}", f"fill-{index}")
        for n in range(index, count, len(STREAMS)):
            producer.append(message(n))
        producer.close()


def start_spark() -> tuple[Any, float]:
    """A local[2] session and a first job; how long both took."""
    from durable_streams_aws.pipeline import local_session

    started = time.perf_counter()
    conf = {"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "2"}
    spark = local_session("spark pipeline benchmark", "local[2]", conf)
    spark.range(1000).selectExpr("sum(id)").collect()
    return spark, time.perf_counter() - started


def measure(
    name: str,
    work: Callable[[], int],
    expected: int,
    repeats: int,
    endpoint: str,
) -> Result:
    """Run `work` (which returns how many rows it handled) `repeats` times; the AWS calls are
    those of the last run."""
    seconds = []
    calls = None
    for _ in range(repeats):
        httpx.delete(f"{endpoint}/__calls")
        started = time.perf_counter()
        rows = work()
        seconds.append(time.perf_counter() - started)
        calls = sum(httpx.get(f"{endpoint}/__calls").json().values())
        if rows != expected:
            raise AssertionError(f"{name}: {rows} rows, expected {expected}")
    return Result(name, expected, seconds, calls)


def read_all(spark: Any, options: dict[str, str]) -> Callable[[], int]:
    def work() -> int:
        reader = spark.read.format("durable_streams")
        for name, value in options.items():
            reader = reader.option(name, value)
        frame = reader.load()
        # Every message goes through Python and Arrow into the JVM (count alone would too,
        # but this also checks them).
        summary = frame.selectExpr("count(*) AS rows", "count(DISTINCT offset, stream) AS keys")
        rows, keys = summary.first()
        if rows != keys:
            raise AssertionError(f"{rows - keys} rows read twice")
        return int(rows)

    return work


def materialize(frame: Callable[[], Any]) -> Callable[[], int]:
    """Every row read, through the `noop` sink (Spark's own way of timing a whole read); the
    rows are counted once, untimed."""
    rows = int(frame().count())

    def work() -> int:
        frame().write.format("noop").mode("overwrite").save()
        return rows

    return work


def against_file_source(
    spark: Any, url: str, endpoint: str, count: int, repeats: int, folder: Path
) -> list[Result]:
    """The same rows read by Spark's JSON file source (from a local file, with the schema),
    and by the source over HTTP with `jsonSchema` and raw, every read materialized."""
    path = folder / "messages.json"
    with path.open("w") as lines:
        for index in range(len(STREAMS)):
            for n in range(index, count, len(STREAMS)):
                lines.write(json.dumps(message(n)) + "\n")
    source = spark.read.format("durable_streams").option("url", url)
    source = source.option("streams", ",".join(STREAMS))
    reads = {
        "Spark's JSON file source, schema, local file": (
            lambda: spark.read.schema(JSON_SCHEMA).json(str(path))
        ),
        "over HTTP with jsonSchema": lambda: source.option("jsonSchema", JSON_SCHEMA).load(),
        "over HTTP, raw messages": lambda: source.load(),
    }
    return [
        measure(name, materialize(frame), count, repeats, endpoint) for name, frame in reads.items()
    ]


def write_all(spark: Any, url: str, count: int) -> Callable[[], int]:
    runs = iter(range(1_000_000))

    def work() -> int:
        target = f"sink/run-{next(runs)}"
        with DurableStream(f"{url}/{target}") as handle:
            handle.create("application/json")
        frame = spark.range(count, numPartitions=2).selectExpr(
            "to_json(named_struct('n', id, 'kind', 'click', 'pad', repeat('x', 60))) AS message"
        )
        frame.write.format("durable_streams").option("url", url).option("stream", target).option(
            "sinkId", "bench"
        ).mode("append").save()
        with DurableStream(f"{url}/{target}") as handle:
            written = sum(len(batch.messages or []) for batch in handle.read())
        return written

    return work


def main(argv: Sequence[str] | None = None, spark: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--against-file-source",
        action="store_true",
        help="also time materialized reads against Spark's JSON file source on the same rows",
    )
    args = parser.parse_args(argv)

    use_emulator_credentials()  # for the server, and for Spark's direct reads
    with counted_emulator() as endpoint:
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "DS_TABLE": TABLE,
            "DS_BUCKET": BUCKET,
            "DS_LISTING": "true",
        }
        with dsaws_serve("--aws", env=env) as url:
            started = time.perf_counter()
            fill(url, args.messages)
            print(f"wrote {args.messages:,} messages in {time.perf_counter() - started:.1f} s")
            own_session = spark is None
            if own_session:
                spark, startup = start_spark()
                print(f"Spark startup (JVM, local[2] session, first job): {startup:.1f} s")
            try:
                direct = {"table": TABLE, "bucket": BUCKET, "endpoint": endpoint}
                results = [
                    measure(
                        "read over HTTP",
                        read_all(spark, {"url": url, "streams": ",".join(STREAMS)}),
                        args.messages,
                        args.repeats,
                        endpoint,
                    ),
                    measure(
                        "read from the store (direct)",
                        read_all(spark, {**direct, "prefix": "bench/"}),
                        args.messages,
                        args.repeats,
                        endpoint,
                    ),
                    measure(
                        "written by the sink",
                        write_all(spark, url, args.messages),
                        args.messages,
                        args.repeats,
                        endpoint,
                    ),
                ]
                compared = []
                if args.against_file_source:
                    with tempfile.TemporaryDirectory() as folder:
                        compared = against_file_source(
                            spark, url, endpoint, args.messages, args.repeats, Path(folder)
                        )
            finally:
                if own_session:
                    spark.stop()
    print()
    columns = ("path", "rows", "seconds per run", "rows/s (median)", "AWS calls per 1000 rows")
    print_table(columns, "<><>>", (result.row() for result in results))
    print(json.dumps({r.path: round(r.per_second) for r in results}))
    if compared:
        print()
        baseline = compared[0].per_second
        print_table(
            ("read, materialized (noop sink)", "rows/s (median)", "against the file source"),
            "<>>",
            ([r.path, f"{r.per_second:,.0f}", f"{r.per_second / baseline:.2f}"] for r in compared),
        )
        print(json.dumps({r.path: round(r.per_second) for r in compared}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
