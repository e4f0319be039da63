"""Reading ahead (`core/storage/_read_ahead.py`): catch-up reads of history written in appends
larger than an inline chunk (an S3 object each), by instances new to the stream, with and
without reading ahead: as written, then sealed as the sealer leaves an open stream (segments,
but for its newest 256 KiB, still those objects). The emulator runs in a process of its own,
first answering at once, then with every call taking 5 to 15 ms (closer to what S3 and
DynamoDB take from a Lambda).

    python3 -m benchmarks.read_ahead            # 100 appends of 1,000 JSON messages (10 MB)
    python3 -m benchmarks.read_ahead --appends 20

Each read is checked against what was written; the AWS calls are counted by the emulator.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx

from benchmarks._floor_source import message
from benchmarks._processes import counted_emulator
from benchmarks._report import print_table
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import use_emulator_credentials
from durable_streams_aws.core.storage import (
    CreateSpec,
    DynamoStore,
    Payload,
    Sealer,
    SealPolicy,
    _chunks,
)
from durable_streams_aws.core.storage.aws import AwsSettings, make_clients
from durable_streams_aws.core.storage.bootstrap import ensure_bucket, ensure_table

TABLE, BUCKET = "read-ahead-bench", "read-ahead-bench-data"
JSON = "application/json"
READ_BYTES = 8 * 1024 * 1024  # a direct read's budget (the Spark source's)


def fill(store: DynamoStore, appends: int, per_append: int) -> list[bytes]:
    store.create("history", CreateSpec(JSON))
    written: list[bytes] = []
    for append in range(appends):
        numbers = range(append * per_append, (append + 1) * per_append)
        units = [json.dumps(message(n)).encode() for n in numbers]
        payload = Payload(b"".join(units), tuple(map(len, units)))
        store.append("history", AppendIntent(JSON, True, False), payload)
        written += units
    return written


def read_all(store: DynamoStore) -> list[bytes]:
    info = store.get("history")
    assert info is not None
    found: list[bytes] = []
    at = 0
    while at < info.tail:
        batch = store.read(info, at, READ_BYTES)
        found += batch.messages or ()
        at = batch.end
    return found


def measure(clients: tuple[Any, Any], endpoint: str, written: list[bytes], repeats: int) -> dict:
    seconds, calls = [], {}
    for _ in range(repeats):
        reader = DynamoStore(*clients, TABLE, BUCKET, chunk_cache_bytes=0)  # new to the stream
        httpx.delete(f"{endpoint}/__calls")
        started = time.perf_counter()
        found = read_all(reader)
        seconds.append(time.perf_counter() - started)
        calls = httpx.get(f"{endpoint}/__calls").json()
        if found != written:
            raise AssertionError(f"read {len(found)} messages, not the {len(written)} written")
    return {"seconds": statistics.median(seconds), "calls": calls}


def both_ways(
    clients: tuple[Any, Any], endpoint: str, written: list[bytes], repeats: int
) -> dict[str, dict]:
    """The reads measured reading ahead, then one chunk after another."""
    ahead = _chunks.read_ahead
    results = {"ahead": measure(clients, endpoint, written, repeats)}
    _chunks.read_ahead = lambda chunks, *_: chunks  # type: ignore[assignment]
    try:
        results["one by one"] = measure(clients, endpoint, written, repeats)
    finally:
        _chunks.read_ahead = ahead
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--per-append", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    use_emulator_credentials()
    rows = []
    for latency in (None, (5.0, 15.0)):
        with counted_emulator(latency) as endpoint:
            clients = make_clients(AwsSettings("us-east-1", endpoint, endpoint))
            ensure_table(clients[0], TABLE)
            ensure_bucket(clients[1], BUCKET)
            writer = DynamoStore(*clients, TABLE, BUCKET)
            written = fill(writer, args.appends, args.per_append)
            size = sum(map(len, written)) / 1e6
            label = "none" if latency is None else f"{latency[0]:g} to {latency[1]:g} ms"
            for history in ("as written", "sealed but its newest 256 KiB"):
                if history != "as written":
                    Sealer(writer, SealPolicy()).seal("history")
                for mode, result in both_ways(clients, endpoint, written, args.repeats).items():
                    by_call = ", ".join(f"{k} {v}" for k, v in sorted(result["calls"].items()))
                    seconds = result["seconds"]
                    ms = f"{seconds * 1000:,.0f}"
                    rows.append([label, history, mode, ms, f"{size / seconds:.1f}", by_call])
    print(
        f"{args.appends} appends of {args.per_append} JSON messages, read whole by a new instance"
    )
    columns = (
        "latency per call",
        "history",
        "reading",
        "ms per read (median)",
        "MB/s",
        "AWS calls",
    )
    print_table(columns, "<<<>><", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
