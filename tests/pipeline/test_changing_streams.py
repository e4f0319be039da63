"""Streams that change under a running streaming query: appended to, closed, forked and
deleted between its micro-batches. What the query had not read of a deleted stream is data
loss: the query fails saying so, or (failOnDataLoss=false) reads on without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_support import batches, run

from durable_streams_aws.client import DurableStream

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def make(url: str, values: list[Any]) -> None:
    with DurableStream(url) as stream:
        stream.create("application/json")
        stream.append(values)


def rows_by_stream(out: Path) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for rows in batches(out).values():
        for stream, _, value in rows:
            found.setdefault(stream, []).append(value)
    return found


def test_a_query_reads_on_through_appends_closes_forks_and_deletes(
    spark: Any, streams_url: str, tmp_path: Path
) -> None:
    for name in "abcd":
        make(f"{streams_url}/live/{name}", [f"{name}{n}" for n in range(30)])
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"

    def change(batch_id: int) -> None:
        if batch_id != 0:
            return
        with DurableStream(f"{streams_url}/live/a") as a:
            a.append([f"a{n}" for n in range(30, 35)])
        with DurableStream(f"{streams_url}/live/b") as b:
            b.close()
        with DurableStream(f"{streams_url}/live/c-fork") as fork:
            fork.fork("/v1/stream/live/c")
        with DurableStream(f"{streams_url}/live/d") as d:
            d.delete()

    options = {"prefix": "live/", "maxMessagesPerTrigger": "40", "failOnDataLoss": "false"}
    sizes, error = run(spark, streams_url, checkpoint, out, change, **options)
    assert error is None, error
    # 10 of each; then the budget is shared by the three left (d's rest is gone): 14+13+13...
    assert sizes == [40, 40, 20]
    first = rows_by_stream(out)
    assert first["live/a"] == [f"a{n}" for n in range(30)]  # up to the tails at the start
    assert first["live/b"] == [f"b{n}" for n in range(30)]
    assert first["live/c"] == [f"c{n}" for n in range(30)]
    assert first["live/d"] == [f"d{n}" for n in range(10)]

    # Restarted: the appends since, and the fork from its beginning (it is new under the
    # prefix); the closed stream has nothing more, the deleted one is not read.
    sizes, error = run(spark, streams_url, checkpoint, out, **options)
    assert error is None, error
    later = {
        stream: values
        for stream, values in rows_by_stream(out).items()
        if values != first.get(stream)
    }
    assert later == {
        "live/a": [f"a{n}" for n in range(35)],
        "live/c-fork": [f"c{n}" for n in range(30)],
    }


def test_a_stream_deleted_under_a_query_fails_it_by_default(
    spark: Any, streams_url: str, tmp_path: Path
) -> None:
    make(f"{streams_url}/doomed", list(range(30)))

    def delete(batch_id: int) -> None:
        if batch_id == 0:
            with DurableStream(f"{streams_url}/doomed") as doomed:
                doomed.delete()

    sizes, error = run(
        spark,
        streams_url,
        tmp_path / "checkpoint",
        tmp_path / "out",
        delete,
        stream="doomed",
        maxMessagesPerTrigger="10",
    )
    assert sizes == [10]
    assert error is not None
    assert "'doomed' was deleted" in str(error) and "failOnDataLoss" in str(error)


def test_a_stream_re_created_shorter_is_read_again_from_its_beginning(
    spark: Any, streams_url: str, tmp_path: Path
) -> None:
    url = f"{streams_url}/again"
    make(url, [f"old-{n:02d}" for n in range(30)])

    def recreate(batch_id: int) -> None:
        if batch_id == 0:  # after 10 of the 30: the stream is replaced by a shorter one
            with DurableStream(url) as again:
                again.delete()
            make(url, ["n0", "n1", "n2"])

    out = tmp_path / "out"
    options = {"stream": "again", "maxMessagesPerTrigger": "10", "failOnDataLoss": "false"}
    sizes, error = run(spark, streams_url, tmp_path / "checkpoint", out, recreate, **options)
    assert error is None, error
    assert sizes == [10, 3]
    assert rows_by_stream(out)["again"] == [f"old-{n:02d}" for n in range(10)] + ["n0", "n1", "n2"]
