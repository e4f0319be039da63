"""Storage cost of a long stream before and after sealing.

Appends 50 MB as 100-byte JSON messages (small appends, inline in DynamoDB), then reports,
before and after the sealer moves the history into S3 segments: DynamoDB items and bytes,
S3 objects and bytes, the AWS calls and time of a full catch-up read over HTTP by a server
that has never read the stream, and the monthly storage cost at list prices. The stream is
left open, so its newest `DS_SEAL_HOT_BYTES` (256 KiB) stay in DynamoDB as they would.

    python -m benchmarks.storage_cost [--megabytes 50] [--messages-per-append 50] [--close]

Targets after sealing (the script exits non-zero when one is missed): DynamoDB holds under 1%
of the stream's bytes, and the catch-up read needs at most two AWS calls per MB read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks._report import print_table
from benchmarks.aws_calls import CallMeter
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    ensure_resources,
    seal_policy,
    use_emulator_credentials,
)
from durable_streams_aws.core.storage import CreateSpec, Payload, Sealer
from durable_streams_aws.infra.emulator import Emulator

MB = 1_000_000
GB = 1_000_000_000
MESSAGE_BYTES = 100
PATH = "history"
JSON = "application/json"
# List prices, us-east-1, on-demand (November 2026).
DYNAMODB_GB_MONTH = 0.25
DYNAMODB_ITEM_OVERHEAD = 100  # bytes DynamoDB bills per item for its own indexing
DYNAMODB_READ_UNIT = 0.125 / 1_000_000  # one strongly consistent 4 KB read (RRU)
DYNAMODB_WRITE_UNIT = 0.625 / 1_000_000  # one 1 KB write (WRU)
S3_GB_MONTH = 0.023
S3_GET = 0.0004 / 1000
S3_PUT = 0.005 / 1000


@dataclass
class Footprint:
    items: int
    item_bytes: int  # as DynamoDB bills them (with its per-item overhead)
    objects: int
    object_bytes: int

    @property
    def monthly_cost(self) -> float:
        return self.item_bytes / GB * DYNAMODB_GB_MONTH + self.object_bytes / GB * S3_GB_MONTH


@dataclass
class CatchUp:
    responses: int
    body_bytes: int
    calls: dict[str, int]
    seconds: float
    read_units: float  # DynamoDB read units the read consumed (estimated from item sizes)

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def calls_per_mb(self, stream_bytes: int) -> float:
        return self.total_calls / (stream_bytes / MB)

    @property
    def request_cost(self) -> float:
        return self.read_units * DYNAMODB_READ_UNIT + self.calls.get("GetObject", 0) * S3_GET


def message(serial: int) -> bytes:
    """A JSON object of exactly MESSAGE_BYTES bytes."""
    head = b'{"seq":"%09d","pad":"' % serial
    return head + b"x" * (MESSAGE_BYTES - len(head) - 2) + b'"}'


def fill(backend: Backend, total_bytes: int, per_append: int) -> int:
    store = backend.store
    store.create(PATH, CreateSpec(JSON))
    serial = 0
    while serial * MESSAGE_BYTES < total_bytes:
        batch = [message(serial + i) for i in range(per_append)]
        serial += per_append
        payload = Payload(b"".join(batch), tuple(map(len, batch)))
        store.append(PATH, AppendIntent(JSON, True, False), payload)
    return serial


def footprint(backend: Backend) -> Footprint:
    items = item_bytes = 0
    for page in backend.dynamodb.get_paginator("scan").paginate(TableName=backend.settings.table):
        for item in page["Items"]:
            items += 1
            item_bytes += item_size(item) + DYNAMODB_ITEM_OVERHEAD
    objects = object_bytes = 0
    for page in backend.s3.get_paginator("list_objects_v2").paginate(
        Bucket=backend.settings.bucket
    ):
        for obj in page.get("Contents", []):
            objects += 1
            object_bytes += obj["Size"]
    return Footprint(items, item_bytes, objects, object_bytes)


def item_size(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (numbers about a byte per two
    digits)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        kind, content = next(iter(value.items()))
        if kind == "S":
            size += len(content.encode())
        elif kind == "B":
            size += len(content)
        elif kind == "N":
            size += len(content) // 2 + 1
        else:
            size += 1
    return size


async def catch_up(settings: Settings, endpoint: str, expected_messages: int) -> CatchUp:
    """Read the stream from the beginning through the app, as a client would, on a server
    that has never seen it (no cached segment directories)."""
    backend = build_backend(settings, endpoint=endpoint)
    meter = CallMeter()
    meter.attach_backend(backend)
    read_units = 0.0

    def count_units(parsed: Any = None, model: Any = None, **_: Any) -> None:
        nonlocal read_units
        for item in (parsed or {}).get("Items", []) or []:
            read_units += (item_size(item) + 1) / 4096
        if "Item" in (parsed or {}):
            read_units += max(1.0, (item_size(parsed["Item"]) + 1) / 4096)

    backend.dynamodb.meta.events.register("after-call.dynamodb", count_units)
    transport = httpx.ASGITransport(app=backend.app())
    responses = body_bytes = received = 0
    started = time.perf_counter()
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        offset = "-1"
        while True:
            response = await client.get(f"/v1/stream/{PATH}", params={"offset": offset})
            response.raise_for_status()
            responses += 1
            body_bytes += len(response.content)
            received += len(response.json())
            offset = response.headers["Stream-Next-Offset"]
            if response.headers.get("Stream-Up-To-Date") == "true":
                break
    seconds = time.perf_counter() - started
    if received != expected_messages:
        raise SystemExit(f"read {received} messages, expected {expected_messages}")
    return CatchUp(responses, body_bytes, dict(meter.calls), seconds, read_units)


def seal(backend: Backend) -> tuple[float, dict[str, int]]:
    meter = CallMeter()
    meter.attach_backend(backend)
    started = time.perf_counter()
    report = Sealer(backend.store, seal_policy(backend.settings)).seal(PATH)
    if report.races_lost:
        raise SystemExit(f"sealing lost a race on a quiet table: {report}")
    return time.perf_counter() - started, dict(meter.calls)


@dataclass
class Measurement:
    stream_bytes: int
    messages: int
    append_seconds: float
    before: Footprint
    after: Footprint
    read_before: CatchUp
    read_after: CatchUp
    seal_seconds: float
    seal_calls: dict[str, int]


def measure(total_bytes: int, per_append: int, close: bool) -> Measurement:
    use_emulator_credentials()
    with Emulator() as emulator:
        settings = Settings(table="storage-cost", bucket="storage-cost")
        backend = build_backend(settings, endpoint=emulator.endpoint)
        ensure_resources(backend)
        started = time.perf_counter()
        messages = fill(backend, total_bytes, per_append)
        append_seconds = time.perf_counter() - started
        if close:
            backend.store.append(PATH, AppendIntent(JSON, False, True), Payload())
        before = footprint(backend)
        read_before = asyncio.run(catch_up(settings, emulator.endpoint, messages))
        seal_seconds, seal_calls = seal(backend)
        after = footprint(backend)
        read_after = asyncio.run(catch_up(settings, emulator.endpoint, messages))
    return Measurement(
        messages * MESSAGE_BYTES,
        messages,
        append_seconds,
        before,
        after,
        read_before,
        read_after,
        seal_seconds,
        seal_calls,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=50.0)
    parser.add_argument("--messages-per-append", type=int, default=50)
    parser.add_argument("--close", action="store_true", help="close the stream before sealing")
    args = parser.parse_args(argv)
    m = measure(int(args.megabytes * MB), args.messages_per_append, args.close)
    print(
        f"appended {m.stream_bytes / MB:.1f} MB: {m.messages:,} messages of {MESSAGE_BYTES} B"
        f" in {m.messages // args.messages_per_append:,} appends"
        f" ({m.append_seconds:.0f} s on the emulator)"
    )
    print_footprint(report_rows(m.stream_bytes, m.before, m.after, m.read_before, m.read_after))
    deletes = m.seal_calls.get("DeleteItem", 0)
    each = ", ".join(f"{name} {count:,}" for name, count in sorted(m.seal_calls.items()))
    print(
        f"\nsealing: {m.seal_seconds:.1f} s on the emulator, {sum(m.seal_calls.values()):,} AWS"
        f" calls ({each}); once, at list prices: ${deletes * DYNAMODB_WRITE_UNIT:.4f} of"
        f" DynamoDB deletes + ${m.seal_calls.get('PutObject', 0) * S3_PUT:.5f} of S3 PUTs"
    )
    checks = targets(m)
    print()
    for text, ok in checks:
        print(f"{'ok  ' if ok else 'MISS'} {text}")
    return 0 if all(ok for _, ok in checks) else 1


def targets(m: Measurement) -> list[tuple[str, bool]]:
    share = m.after.item_bytes / m.stream_bytes
    per_mb = m.read_after.calls_per_mb(m.stream_bytes)
    return [
        (f"DynamoDB holds {share:.2%} of the stream's bytes (target: under 1%)", share < 0.01),
        (f"catch-up read: {per_mb:.2f} AWS calls per MB (target: at most 2)", per_mb <= 2.0),
    ]


def report_rows(
    stream_bytes: int,
    before: Footprint,
    after: Footprint,
    read_before: CatchUp,
    read_after: CatchUp,
) -> list[tuple[str, str, str]]:
    def calls(read: CatchUp) -> str:
        each = ", ".join(f"{name} {count}" for name, count in sorted(read.calls.items()))
        return f"{read.total_calls:,} ({each})"

    return [
        ("DynamoDB items", f"{before.items:,}", f"{after.items:,}"),
        (
            "DynamoDB bytes (billed)",
            f"{before.item_bytes / MB:.2f} MB ({before.item_bytes / stream_bytes:.1%})",
            f"{after.item_bytes / MB:.3f} MB ({after.item_bytes / stream_bytes:.2%})",
        ),
        ("S3 objects", f"{before.objects:,}", f"{after.objects:,}"),
        ("S3 bytes", f"{before.object_bytes / MB:.2f} MB", f"{after.object_bytes / MB:.2f} MB"),
        ("catch-up responses", f"{read_before.responses:,}", f"{read_after.responses:,}"),
        ("catch-up AWS calls", calls(read_before), calls(read_after)),
        (
            "calls per MB read",
            f"{read_before.calls_per_mb(stream_bytes):.2f}",
            f"{read_after.calls_per_mb(stream_bytes):.2f}",
        ),
        (
            "catch-up time (emulator)",
            f"{read_before.seconds:.1f} s",
            f"{read_after.seconds:.1f} s",
        ),
        (
            "catch-up request cost",
            f"${read_before.request_cost:.5f}",
            f"${read_after.request_cost:.5f}",
        ),
        (
            "storage cost per month",
            f"${before.monthly_cost:.4f}",
            f"${after.monthly_cost:.4f}",
        ),
    ]


def print_footprint(rows: list[tuple[str, str, str]]) -> None:
    print()
    print_table(("", "before sealing", "after sealing"), "<<<", rows)


if __name__ == "__main__":
    sys.exit(main())
