"""The export job: streams to Parquet partitioned by stream, straight from the store or over
HTTP, each run adding exactly what the streams gained since the last one; and its commands
(`dsaws export`, and `spark-submit pipeline/export.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from spark_support import Served
from support import ROOT

from durable_streams_aws.client import DurableStream
from durable_streams_aws.pipeline import DataLoss, OptionError
from durable_streams_aws.pipeline.export import export, read_dataset

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def append(url: str, data: Any, content_type: str = "application/json") -> None:
    with DurableStream(url) as stream:
        stream.create(content_type)
        stream.append(data)


def exported(spark: Any, output: Path) -> list[tuple]:
    frame = read_dataset(spark, str(output))
    return sorted((r.stream, r.offset, r.message) for r in frame.collect())


def contents(rows: list[tuple]) -> dict[str, list[str] | str]:
    """Stream -> its JSON messages, or its text as one string (a text stream is a row per
    read, and reads of the same bytes may be cut differently)."""
    found: dict[str, Any] = {}
    for stream, _, message in rows:
        if stream.endswith("007"):
            found[stream] = found.get(stream, "") + message
        else:
            found.setdefault(stream, []).append(message)
    return found


def streams_now(spark: Any, options: dict[str, str]) -> list[tuple]:
    reader = spark.read.format("durable_streams")
    for name, value in options.items():
        reader = reader.option(name, value)
    return sorted((r.stream, r.offset, r.message) for r in reader.load().collect())


def test_each_export_adds_what_the_streams_gained(
    spark: Any, served: Served, tmp_path: Path
) -> None:
    append(f"{served.url}/exp/a", [{"n": n} for n in range(50)])
    append(f"{served.url}/exp/007", "plain text, ", "text/plain")
    direct = {**served.store_options, "prefix": "exp/"}
    output = tmp_path / "lake"

    first = export(spark, direct, str(output))
    assert first.before == {} and first.rows == 51
    assert exported(spark, output) == streams_now(spark, direct)
    assert sorted(first.after) == ["exp/007", "exp/a"]  # "007" stays a path, not the number 7

    with DurableStream(f"{served.url}/exp/a") as a:
        a.append([{"n": n} for n in range(50, 70)])
    with DurableStream(f"{served.url}/exp/007") as text:
        text.append("and more")
    append(f"{served.url}/exp/new", [1, 2, 3])
    second = export(spark, direct, str(output))
    assert second.before == first.after and second.rows == 20 + 1 + 3
    rows = exported(spark, output)
    assert contents(rows) == contents(streams_now(spark, direct))  # all of it, nothing twice
    assert contents(rows)["exp/007"] == "plain text, and more"
    assert [json.loads(m) for s, _, m in rows if s == "exp/a"] == [{"n": n} for n in range(70)]

    assert export(spark, direct, str(output)).rows == 0  # nothing new: nothing added

    over_http = tmp_path / "lake-http"
    export(spark, {"url": served.url, "prefix": "exp/"}, str(over_http))
    assert contents(exported(spark, over_http)) == contents(rows)

    with DurableStream(f"{served.url}/exp/a") as a:  # re-created: its offsets start again
        a.delete()
    append(f"{served.url}/exp/a", [{"n": "new"}])
    with pytest.raises(DataLoss, match="'exp/a' was re-created since the last export"):
        export(spark, {**direct, "failOnDataLoss": "false"}, str(output))
    assert exported(spark, output) == rows  # nothing was added


def command(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def test_the_commands_export_directly_and_over_http(served: Served, tmp_path: Path) -> None:
    append(f"{served.url}/cmd/x", [{"k": n} for n in range(25)])
    store = ["--table", served.table, "--bucket", served.bucket, "--endpoint", served.endpoint]
    direct = command(
        sys.executable,
        "-m",
        "durable_streams_aws.core.cli",
        "export",
        *store,
        "--prefix",
        "cmd/",
        "--output",
        str(tmp_path / "direct"),
        "--master",
        "local[1]",
    )
    assert direct.returncode == 0, direct.stderr[-3000:]
    assert "exported 25 rows from 1 of 1 streams" in direct.stdout

    import pyspark

    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    over_http = command(
        str(spark_submit),
        "--master",
        "local[1]",
        str(ROOT / "pipeline" / "export.py"),
        "--url",
        served.url,
        "--stream",
        "cmd/x",
        "--output",
        str(tmp_path / "http"),
    )
    assert over_http.returncode == 0, over_http.stderr[-3000:]
    assert "exported 25 rows" in over_http.stdout

    tables = [pq.read_table(tmp_path / name).to_pylist() for name in ("direct", "http")]
    assert tables[0] == tables[1]
    assert [json.loads(row["message"]) for row in tables[0]] == [{"k": n} for n in range(25)]
    assert {row["stream"] for row in tables[0]} == {"cmd/x"}


def test_bad_export_arguments_say_why(tmp_path: Path) -> None:
    answer = command(
        sys.executable,
        "-m",
        "durable_streams_aws.core.cli",
        "export",
        "--output",
        str(tmp_path),
        "--stream",
        "a",
    )
    assert answer.returncode == 2
    assert "'url' is required" in answer.stderr


def test_an_export_that_found_nothing_and_one_of_another_kind(
    spark: Any, served: Served, tmp_path: Path
) -> None:
    direct = {**served.store_options, "prefix": "later/"}
    output = tmp_path / "lake"
    for _ in range(2):  # nothing there yet: only Spark's marker is written, and that is fine
        assert export(spark, direct, str(output)).rows == 0
    append(f"{served.url}/later/json", [1, 2])
    assert export(spark, direct, str(output)).rows == 2

    append(f"{served.url}/later/bytes", b"\x00\xff", "application/octet-stream")
    with pytest.raises(OptionError, match="do not match the dataset"):
        export(spark, direct, str(output))  # messages would be bytes now, not strings
    assert [m for _, _, m in exported(spark, output)] == ["1", "2"]
