"""Helpers of the Spark tests: the server they read, and runs of a streaming query over the
`durable_streams` source (each one AvailableNow query from a checkpoint, every micro-batch it
writes kept on disk)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Served:
    """A `dsaws serve` on the session's emulator: its streams' base URL, and where it stores
    them (for the direct reads of bulk jobs)."""

    url: str
    table: str
    bucket: str
    endpoint: str

    @property
    def store_options(self) -> dict[str, str]:
        return {"table": self.table, "bucket": self.bucket, "endpoint": self.endpoint}


def run(
    spark: Any,
    streams_url: str,
    checkpoint: Path,
    out: Path,
    on_batch: Callable[[int], None] | None = None,
    **options: str,
) -> tuple[list[int], Exception | None]:
    """One AvailableNow run; every micro-batch is written to `out/<batch>-<n>.json` (n counts
    the times that batch was written, so a replay is kept beside the original), then
    `on_batch(batch_id)` runs. Returns the sizes of the batches this run wrote, and the error
    the query stopped with (if any)."""
    out.mkdir(exist_ok=True)
    before = set(out.glob("*.json"))

    def keep(frame: Any, batch_id: int) -> None:
        attempt = len(list(out.glob(f"{batch_id}-*.json")))
        # By stream and offset; a snapshot's rows share its offset and keep their order.
        found = [(r.stream, r.offset, json.loads(r.message)) for r in frame.collect()]
        rows = sorted(found, key=lambda row: row[:2])
        (out / f"{batch_id}-{attempt}.json").write_text(json.dumps(rows))
        if on_batch is not None:
            on_batch(batch_id)

    reader = spark.readStream.format("durable_streams").option("url", streams_url)
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(120)
    except Exception as error:  # the query failed: the caller decides whether it should have
        return _sizes(out, before), error
    return _sizes(out, before), query.exception()


def _sizes(out: Path, before: set[Path]) -> list[int]:
    written = sorted(set(out.glob("*.json")) - before, key=lambda p: int(p.stem.split("-")[0]))
    return [len(json.loads(p.read_text())) for p in written]


def batches(out: Path) -> dict[str, list]:
    """Every batch written, in batch order: `<batch>-<attempt>` -> its rows."""
    paths = sorted(out.glob("*.json"), key=lambda p: tuple(map(int, p.stem.split("-"))))
    return {p.stem: json.loads(p.read_text()) for p in paths}
