"""The Spark pipeline's throughput on local Spark: rows per second read through the
`durable_streams` source (over HTTP, and straight from the store) and written by its sink.

    python3 -m benchmarks.spark_pipeline              # 100k messages of about 100 bytes
    python3 -m benchmarks.spark_pipeline --against-file-source   # and Spark's own JSON reader
    python3 -m benchmarks.spark_pipeline --against-file-source --headline-only --messages 1000000

The streams are served by `dsaws serve --aws` on an emulator in a process of its own (which
counts the AWS calls each path makes). Spark's startup (the JVM, the session, a first job) is
timed apart from the runs. Every run checks what it read or wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks._cpu import cpu_by_role, spent
from benchmarks._floor_source import FloorSource, message
from benchmarks._processes import counted_emulator, dsaws_serve
from benchmarks._report import print_table
from durable_streams_aws.client import DurableStream
from durable_streams_aws.core.runtime import use_emulator_credentials

STREAMS = ("bench/a", "bench/b")  # two streams: one partition each on local[2]
TABLE, BUCKET = "pipeline-bench", "pipeline-bench-data"
JSON = {"Content-Type": "application/json"}
FILE_SOURCE = "Spark's JSON file source (local file, schema)"
FLOOR = "a Python data source that reads nothing (rows kept in memory)"
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


@dataclass(frozen=True)
class Dataset:
    """Rows written into `streams` (message n into stream n % len(streams)), in appends of
    `per_append` messages."""

    name: str
    streams: tuple[str, ...]
    rows: int
    per_append: int


def datasets(rows: int) -> list[Dataset]:
    """The comparison's workloads: the headline (two streams, appends of 1,000), one stream and
    eight, and 100-byte appends (a message each: a fifth of the rows, as each is a request)."""
    return [
        Dataset("2 streams, appends of 1,000", ("cmp2/a", "cmp2/b"), rows, 1000),
        Dataset("1 stream, appends of 1,000", ("cmp1/a",), rows, 1000),
        Dataset("8 streams, appends of 1,000", tuple(f"cmp8/{i}" for i in range(8)), rows, 1000),
        Dataset("2 streams, 100-byte appends", ("cmpx/a", "cmpx/b"), max(rows // 5, 2), 1),
    ]


def fill_dataset(url: str, dataset: Dataset) -> None:
    """Each stream created and written by a thread of its own, with plain appends (bodies of
    `per_append` messages; a plain append is sent once, never retried)."""
    count = len(dataset.streams)

    def write(index: int) -> None:
        stream = f"{url}/{dataset.streams[index]}"
        with httpx.Client(timeout=60) as client:
            created = client.put(stream, headers={"Content-Type": "application/json"})
            created.raise_for_status()
            numbers = range(index, dataset.rows, count)
            for lo in range(0, len(numbers), dataset.per_append):
                body = json.dumps([message(n) for n in numbers[lo : lo + dataset.per_append]])
                answer = client.post(stream, content=body, headers=JSON)
                answer.raise_for_status()

    with ThreadPoolExecutor(min(count, 4)) as pool:
        list(pool.map(write, range(count)))


def write_lines(dataset: Dataset, path: Path) -> None:
    """The same rows as one JSON text per line, for Spark's own JSON file source."""
    with path.open("w") as lines:
        for index in range(len(dataset.streams)):
            for n in range(index, dataset.rows, len(dataset.streams)):
                lines.write(json.dumps(message(n)) + "\n")


def seal(endpoint: str) -> None:
    """What the sealer moves to S3 segments, moved now (the server's own sealer is off, so the
    reads before this one read the streams as written)."""
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "DS_TABLE": TABLE, "DS_BUCKET": BUCKET}
    command = [sys.executable, "-m", "durable_streams_aws.core.cli", "seal", "--aws", "--all"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=600)


def role_of(command: str) -> str | None:
    """What a process of the run is, by its command line."""
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "Python workers"
    if "org.apache.spark" in command:
        return "JVM"
    if "counted_emulator" in command:
        return "emulator"
    if "durable_streams_aws.core.cli serve" in command:
        return "server"
    return None


@dataclass(frozen=True)
class Compared:
    dataset: str
    path: str
    state: str
    result: Result
    cpu: dict[str, float]  # CPU seconds by process, per run (median run's reading)

    def row(self, baseline: float) -> list[str]:
        total = sum(self.cpu.values()) or 1.0
        share = self.cpu.get("Python workers", 0.0) / total
        by_process = ", ".join(
            f"{role} {seconds:.2f}" for role, seconds in sorted(self.cpu.items()) if seconds
        )
        calls = self.result.aws_calls or 0
        return [
            self.dataset,
            self.path,
            self.state,
            f"{self.result.per_second:,.0f}",
            f"{self.result.per_second / baseline:.2f}",
            f"{calls * 1000 / self.result.rows:.2f}",
            f"{share:.0%}",
            by_process,
        ]


def compare_reads(
    spark: Any,
    url: str,
    endpoint: str,
    dataset: Dataset,
    repeats: int,
    folder: Path,
    warmup: int,
) -> list[Compared]:
    """The dataset read by Spark's JSON file source, by a Python source that reads nothing (the
    floor of any Python source), and by this source, over HTTP and direct,
    with `jsonSchema` and raw; every read materialized (noop sink). The source reads the
    streams as written, then once the sealer has run."""
    spark.dataSource.register(FloorSource)
    fill_dataset(url, dataset)
    path = folder / f"{len(dataset.streams)}-{dataset.per_append}.json"
    write_lines(dataset, path)
    streams = ",".join(dataset.streams)
    http = {"url": url, "streams": streams}
    # Partitioned as the source does by default (a partition per stream, small ones packed
    # into as many as the cores): `bytesPerPartition` splits a long range for more cores than
    # these two, and here would only make more tasks.
    direct = {"table": TABLE, "bucket": BUCKET, "endpoint": endpoint, "streams": streams}

    def source(options: dict[str, str], schema: bool) -> Callable[[], Any]:
        def frame() -> Any:
            reader = spark.read.format("durable_streams")
            for name, value in options.items():
                reader = reader.option(name, value)
            return reader.option("jsonSchema", JSON_SCHEMA).load() if schema else reader.load()

        return frame

    reads = {
        "over HTTP, jsonSchema": source(http, True),
        "over HTTP, raw": source(http, False),
        "direct, jsonSchema": source(direct, True),
        "direct, raw": source(direct, False),
    }

    def file_source() -> Any:
        return spark.read.schema(JSON_SCHEMA).json(str(path))

    def floor() -> Any:
        reader = spark.read.format(FloorSource.name()).option("streams", streams)
        return reader.option("rows", str(dataset.rows)).load()

    results = []
    for state in ("as written", "sealed"):
        if state == "sealed":
            seal(endpoint)
            warmup = min(warmup, 3)  # the same reads, warmed a moment ago
        frames = {FILE_SOURCE: file_source, FLOOR: floor, **reads}
        results += interleaved(state, dataset, frames, repeats, endpoint, warmup)
    return results


def interleaved(
    state: str,
    dataset: Dataset,
    frames: dict[str, Callable[[], Any]],
    repeats: int,
    endpoint: str,
    warmup: int,
) -> list[Compared]:
    """Each read timed `repeats` times, in rounds that run every read once (so that what the
    machine does meanwhile weighs on all of them alike), after `warmup` such rounds untimed;
    the AWS calls are the last round's, the CPU readings the median run's."""
    runs = {name: materialize(frame) for name, frame in frames.items()}
    for _ in range(warmup):
        for run in runs.values():
            run()
    seconds: dict[str, list[float]] = {name: [] for name in frames}
    readings: dict[str, list[dict[str, float]]] = {name: [] for name in frames}
    calls: dict[str, int] = {}
    for _ in range(repeats):
        for name, run in runs.items():
            httpx.delete(f"{endpoint}/__calls")
            before = cpu_by_role(role_of)
            started = time.perf_counter()
            rows = run()
            seconds[name].append(time.perf_counter() - started)
            readings[name].append(spent(before, cpu_by_role(role_of)))
            calls[name] = sum(httpx.get(f"{endpoint}/__calls").json().values())
            if rows != dataset.rows:
                raise AssertionError(f"{name}: {rows} rows, expected {dataset.rows}")
    compared = []
    for name in frames:
        median = sorted(range(repeats), key=lambda i: seconds[name][i])[repeats // 2]
        result = Result(name, dataset.rows, seconds[name], calls[name])
        compared.append(Compared(dataset.name, name, state, result, readings[name][median]))
    return compared


def raw_appends(url: str, count: int, partitions: int = 2) -> Callable[[], int]:
    """The server's own append throughput, as the sink uses it: the same messages in requests of
    about `CHUNK_BYTES`, each producer's in order, one producer per partition (a thread each)."""
    from durable_streams_aws.pipeline.sink import CHUNK_BYTES

    runs = iter(range(1_000_000))

    def work() -> int:
        target = f"{url}/raw/run-{next(runs)}"
        httpx.put(target, headers=JSON).raise_for_status()

        def produce(partition: int) -> int:
            numbers = range(partition, count, partitions)
            encoded = [json.dumps(sink_message(n), separators=(",", ":")).encode() for n in numbers]
            bodies, piece, size = [], [], 0
            for one in encoded:
                piece.append(one)
                size += len(one)
                if size >= CHUNK_BYTES:
                    bodies.append(b"[" + b",".join(piece) + b"]")
                    piece, size = [], 0
            if piece:
                bodies.append(b"[" + b",".join(piece) + b"]")
            with httpx.Client(timeout=60) as client:
                for seq, body in enumerate(bodies):
                    headers = {**JSON, "Producer-Id": f"raw-{partition}", "Producer-Epoch": "0"}
                    headers["Producer-Seq"] = str(seq)
                    client.post(target, content=body, headers=headers).raise_for_status()
            return len(encoded)

        with ThreadPoolExecutor(partitions) as pool:
            return sum(pool.map(produce, range(partitions)))

    return work


def sink_message(n: int) -> dict[str, Any]:
    """What the sink's benchmark frame holds in row n (`to_json` of the same struct)."""
    return {"n": n, "kind": "click", "pad": "x" * 60}


def write_all(spark: Any, url: str, count: int, written: list[str]) -> Callable[[], int]:
    """The sink writing `count` rows into a new stream each run (named in `written`, for
    `check_written` to read once the runs are timed)."""
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
        written.append(target)
        return count

    return work


def check_written(url: str, streams: list[str], count: int) -> None:
    """Every stream written holds each row's message exactly once."""
    for stream in streams:
        with DurableStream(f"{url}/{stream}") as handle:
            numbers = [m["n"] for batch in handle.read() for m in batch.messages or []]
        if sorted(numbers) != list(range(count)):
            raise AssertionError(f"{stream}: {len(numbers)} messages, not rows 0..{count - 1}")


def main(argv: Sequence[str] | None = None, spark: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--against-file-source",
        action="store_true",
        help="also compare materialized reads with Spark's JSON file source on the same rows "
        "(1, 2 and 8 streams; appends of 1,000 messages and of one), and the sink with the "
        "server's own append throughput",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=30,
        help="with --against-file-source, untimed rounds of every read before the first "
        "workload's are timed (3 before each later one's): the JVM compiles the file source's "
        "JSON reading over its first few dozen runs, and a cold one would flatter every ratio",
    )
    parser.add_argument(
        "--headline-only",
        action="store_true",
        help="with --against-file-source, compare the reads of the headline workload only "
        "(two streams, appends of 1,000): for runs of many messages",
    )
    args = parser.parse_args(argv)

    use_emulator_credentials()  # for the server, and for Spark's direct reads
    with counted_emulator() as endpoint:
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "DS_TABLE": TABLE,
            "DS_BUCKET": BUCKET,
            "DS_LISTING": "true",
            "DS_SEAL_INTERVAL": "0",  # sealed when the benchmark says (`seal`)
        }
        with dsaws_serve("--aws", env=env) as url:
            started = time.perf_counter()
            fill_dataset(url, Dataset("bench", STREAMS, args.messages, 1000))
            print(f"wrote {args.messages:,} messages in {time.perf_counter() - started:.1f} s")
            seal(endpoint)
            own_session = spark is None
            if own_session:
                spark, startup = start_spark()
                print(f"Spark startup (JVM, local[2] session, first job): {startup:.1f} s")
            try:
                direct = {"table": TABLE, "bucket": BUCKET, "endpoint": endpoint}
                sinks: list[str] = []
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
                        write_all(spark, url, args.messages, sinks),
                        args.messages,
                        args.repeats,
                        endpoint,
                    ),
                ]
                check_written(url, sinks, args.messages)
                compared: list[Compared] = []
                if args.against_file_source:
                    results.append(
                        measure(
                            "appended over HTTP by 2 producers (no Spark)",
                            raw_appends(url, args.messages),
                            args.messages,
                            args.repeats,
                            endpoint,
                        )
                    )
                    with tempfile.TemporaryDirectory() as folder:
                        compared_sets = datasets(args.messages)
                        if args.headline_only:
                            compared_sets = compared_sets[:1]
                        for index, dataset in enumerate(compared_sets):
                            warmup = args.warmup if index == 0 else min(args.warmup, 3)
                            compared += compare_reads(
                                spark, url, endpoint, dataset, args.repeats, Path(folder), warmup
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
        print_comparison(compared)
    return 0


def print_comparison(compared: list[Compared]) -> None:
    columns = (
        "rows of",
        "read, materialized (noop sink)",
        "stored",
        "rows/s (median)",
        "against the file source",
        "AWS calls per 1000 rows",
        "Python workers' share of CPU",
        "CPU seconds by process (median run)",
    )
    baselines = {
        (c.dataset, c.state): c.result.per_second for c in compared if c.path == FILE_SOURCE
    }
    print_table(columns, "<<<>>>><", (c.row(baselines[c.dataset, c.state]) for c in compared))
    print(
        json.dumps(
            {f"{c.dataset} | {c.path} | {c.state}": round(c.result.per_second) for c in compared}
        )
    )


if __name__ == "__main__":
    sys.exit(main())
