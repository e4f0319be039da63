"""The export job: streams to Parquet, partitioned by stream, each run carrying on where the
previous one stopped.

    dsaws export --table T --bucket B --prefix orders/ --output ./lake/orders   (local Spark)
    spark-submit pipeline/export.py --table T --bucket B --prefix orders/ --output s3://lake/o
    ... --url https://dxxxx.cloudfront.net/v1/stream ...   (through the public API instead)

Where each stream stands is read back from the output itself (the greatest offset exported
per stream), not from a file beside it: a run that failed before Spark committed its output
left nothing behind, so the next run reads the same range again, and nothing is exported twice.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# No output yet, or only the marker of runs that found nothing to write.
NO_DATASET_CONDITIONS = {"PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA"}
TYPE_INFERENCE = "spark.sql.sources.partitionColumnTypeInference.enabled"


@dataclass(frozen=True)
class ExportReport:
    before: dict[str, str]  # stream -> the offset exported up to, before this run
    after: dict[str, str]
    rows: int  # rows this run added

    def summary(self) -> str:
        moved = sorted(s for s in self.after if self.after[s] != self.before.get(s))
        return f"exported {self.rows} rows from {len(moved)} of {len(self.after)} streams"


def export(spark: Any, read_options: dict[str, str], output: str) -> ExportReport:
    """Append to the Parquet dataset at `output` what the streams (chosen by `read_options`,
    the `durable_streams` source's options) hold past what it already has."""
    existing = _dataset(spark, output)
    before, held = _standing(existing)
    options = dict(read_options)
    if before:
        starting = {s: _resumed(offset) for s, offset in _still_read(before, options).items()}
        _refuse_recreated(starting, options)
        options["startingOffsets"] = json.dumps(starting)
    reader = spark.read.format("durable_streams")
    for name, value in options.items():
        reader = reader.option(name, value)
    frame = reader.load()
    if existing is not None:
        _check_columns(frame.schema, existing.schema)
    # One writer task per stream, so each stream's new rows land in one file: a run whose
    # commit is cut short leaves a stream's file whole or absent, never a gap to resume over.
    rows = frame.repartition("stream").sortWithinPartitions("stream", "offset")
    rows.write.mode("append").partitionBy("stream").parquet(output)
    after, total = _standing(_dataset(spark, output))
    return ExportReport(before, after, total - held)


def _still_read(offsets: dict[str, str], options: dict[str, str]) -> dict[str, str]:
    """The offsets of the streams this run reads (named ones must be named again)."""
    if options.get("prefix") is not None:
        prefix = options["prefix"]
        named = {s for s in offsets if s.startswith(prefix)}
    else:
        named = set()
    for key in ("stream", "streams"):
        named |= {s.strip().strip("/") for s in options.get(key, "").split(",") if s.strip()}
    return {s: offset for s, offset in offsets.items() if s in named}


def _resumed(offset: str) -> str:
    """Where a stream is read on from, given the greatest offset exported of it: there, or
    after a compacted stream's snapshot when that is all it had (its rows carry its token)."""
    from durable_streams_aws.pipeline._plan import is_snapshot, retained_from

    return retained_from(offset) if is_snapshot(offset) else offset


def _check_columns(new: Any, existing: Any) -> None:
    """Refuse rows the dataset cannot take: `message` is a string when every stream read is
    JSON or text and bytes otherwise, and `value` comes with --json-schema only."""
    from durable_streams_aws.pipeline._plan import OptionError

    def shape(schema: Any) -> dict[str, str]:
        return {field.name: field.dataType.simpleString() for field in schema.fields}

    if shape(new) != shape(existing):
        raise OptionError(
            f"these rows ({shape(new)}) do not match the dataset's ({shape(existing)}): "
            "export streams of another kind, or another --json-schema, to another output"
        )


def _refuse_recreated(starting: dict[str, str], options: dict[str, str]) -> None:
    """A stream now shorter than what was exported of it was deleted and re-created: its new
    offsets would repeat the old ones in the dataset, so the export stops (whatever
    failOnDataLoss says) and names it."""
    from durable_streams_aws.pipeline._partitions import resolve
    from durable_streams_aws.pipeline._plan import DataLoss, ReadOptions, position

    _, states, _ = resolve(ReadOptions.parse({k.lower(): v for k, v in options.items()}))
    for stream, offset in sorted(starting.items()):
        state = states.get(stream)
        if state is not None and position(state.tail) < position(offset):
            raise DataLoss(
                f"stream {stream!r} was re-created since the last export (it ends before "
                f"{offset}): move its partition out of the dataset to export it afresh"
            )


def _standing(frame: Any) -> tuple[dict[str, str], int]:
    """Where each stream stands in a dataset (None: there is none yet), and its row count.
    Offsets are fixed-width, so the greatest string is the last message."""
    if frame is None:
        return {}, 0
    from pyspark.sql import functions as f

    found = frame.groupBy("stream").agg(f.max("offset").alias("offset")).collect()
    return {row.stream: row.offset for row in found}, int(frame.count())


def _dataset(spark: Any, output: str) -> Any:
    """The dataset, or None when there is none yet."""
    from pyspark.errors import AnalysisException

    try:
        return read_dataset(spark, output)
    except AnalysisException as error:
        if error.getCondition() in NO_DATASET_CONDITIONS:
            return None
        raise


def read_dataset(spark: Any, output: str) -> Any:
    """The exported dataset, with stream paths as they are: Spark would otherwise read a
    partition value such as "007" as the number 7."""
    spark.conf.set(TYPE_INFERENCE, "false")
    return spark.read.parquet(output)


# ------------------------------------------------------------------ the command line


def build_parser(prog: str = "export") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Export streams to Parquet partitioned by stream, carrying on from the "
        "previous export to the same output.",
    )
    where = parser.add_argument_group("where the streams are (one of)")
    where.add_argument("--url", help="the streams' base URL, e.g. https://host/v1/stream")
    where.add_argument("--table", help="the DynamoDB table (read directly, with --bucket)")
    where.add_argument("--bucket", help="the S3 bucket of the stream data")
    where.add_argument("--endpoint", help="an AWS-compatible endpoint (e.g. the emulator)")
    where.add_argument("--region", help="the AWS region (default: the environment's)")
    which = parser.add_argument_group("which streams (any of)")
    which.add_argument("--stream", action="append", default=[], help="a stream path")
    which.add_argument("--prefix", help="every stream whose path starts with this")
    parser.add_argument("--output", required=True, help="the Parquet dataset (path or s3://)")
    parser.add_argument("--json-schema", help="DDL to parse JSON messages into a value column")
    parser.add_argument(
        "--bytes-per-partition",
        type=int,
        help="split each stream's range into partitions of about this many bytes (direct)",
    )
    parser.add_argument(
        "--skip-lost",
        action="store_true",
        help="read on past named streams deleted since the last export (a stream "
        "re-created since then always stops the export)",
    )
    parser.add_argument(
        "--master", help="the Spark master (default: spark-submit's, or local[*] on its own)"
    )
    return parser


def read_options(args: argparse.Namespace) -> dict[str, str]:
    given = {
        "url": args.url,
        "table": args.table,
        "bucket": args.bucket,
        "endpoint": args.endpoint,
        "region": args.region,
        "streams": ",".join(args.stream) or None,
        "prefix": args.prefix,
        "jsonSchema": args.json_schema,
        "bytesPerPartition": None
        if args.bytes_per_partition is None
        else str(args.bytes_per_partition),
        "failOnDataLoss": "false" if args.skip_lost else None,
    }
    return {name: value for name, value in given.items() if value is not None}


def main(argv: Sequence[str] | None = None, prog: str = "export") -> int:
    args = build_parser(prog).parse_args(argv)
    options = read_options(args)
    from durable_streams_aws.pipeline._plan import OptionError, ReadOptions

    try:
        ReadOptions.parse({name.lower(): value for name, value in options.items()})
    except OptionError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    spark = _session(args.master)
    try:
        from durable_streams_aws.pipeline import DataLoss

        report = export(spark, options, args.output)
    except (DataLoss, OptionError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 4
    finally:
        spark.stop()
    print(f"{prog}: {report.summary()} into {args.output}")
    for stream in sorted(report.after):
        print(f"  {stream}: up to {report.after[stream]}")
    return 0


def _session(master: str | None) -> Any:
    import os

    from durable_streams_aws.pipeline import local_session, register

    # Under spark-submit the launcher has started the JVM and chosen the master already.
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        return local_session("durable-streams export", master or "local[*]")
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("durable-streams export").getOrCreate()
    register(spark)
    return spark


if __name__ == "__main__":
    sys.exit(main())
