"""AWS calls per operation, counted with botocore event hooks, and server overhead per request.

Runs the real app in-process (httpx over ASGI) on the embedded emulator and prints a table.
The budgets are DESIGN.md section 6; the script exits non-zero if one is exceeded.

    python -m benchmarks.aws_calls [--dynamodb-local] [--quick]

`--dynamodb-local`: DynamoDB on Amazon's DynamoDB Local (S3 still the emulator's): the same
calls counted the same way, on DynamoDB's own paging and validation. `--quick`: the same
scenarios and budgets on less work (the test suite's run): 5 repeats, a 200-append stream, a
2 s idle wait, and the 4 MiB of history in 4 KiB appends (the per-MiB budgets still apply: a
chunk Query pages by DynamoDB's 1 MB whatever the appends' size).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.auth import mint_token, parse_grants, parse_key_set
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    ensure_resources,
    seal_policy,
    use_emulator_credentials,
)
from durable_streams_aws.core.storage import CreateSpec, DynamoStore, Payload, Sealer
from durable_streams_aws.infra.dynamodb_local import DynamoDBLocal
from durable_streams_aws.infra.emulator import Emulator

MIB = 1024 * 1024


@dataclass(frozen=True)
class Sizes:
    """How much work each scenario does."""

    repeats: int = 20
    long_stream_appends: int = 2000
    idle_wait_seconds: float = 3.0
    # History written the way chat messages and tokens arrive: this much, in appends this size.
    history_bytes: int = 4 * MIB
    history_append_bytes: int = 1024


FULL = Sizes()
# Fewer appends, same per-MiB budgets: 4 MiB still fills one response of sealed history.
QUICK = Sizes(repeats=5, long_stream_appends=200, idle_wait_seconds=2.0, history_append_bytes=4096)
HISTORY_READS = 3
# AWS calls per MiB of such history read at b79c177 (before the chunk cache, when a chunk
# Query stopped at 500 items), by the writer and by a new instance alike: what it may not exceed.
SMALL_HISTORY_BUDGETS = {"chunks": 2.5, "sealed": 0.75}
AUDIENCE = "durable-streams"
POLL_INTERVAL = 0.2


@dataclass
class CallMeter:
    """Counts AWS API calls and the wall time spent inside them."""

    calls: Counter[str] = field(default_factory=Counter)
    aws_seconds: float = 0.0
    _started: dict[int, float] = field(default_factory=dict)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call", self._before)
        client.meta.events.register("after-call", self._after)

    def attach_backend(self, backend: Backend) -> None:
        """Counts the calls of both of `backend`'s clients, DynamoDB's and S3's."""
        self.attach(backend.dynamodb)
        self.attach(backend.s3)

    def _before(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1
        self._started[id(model)] = time.perf_counter()

    def _after(self, model: Any, **_: Any) -> None:
        started = self._started.pop(id(model), None)
        if started is not None:
            self.aws_seconds += time.perf_counter() - started

    def reset(self) -> None:
        self.calls.clear()
        self.aws_seconds = 0.0


@dataclass
class Row:
    operation: str
    calls_per_op: float
    detail: str
    overhead_ms: float | None
    budget: float | None

    @property
    def ok(self) -> bool:
        return self.budget is None or self.calls_per_op <= self.budget


async def measure(
    meter: CallMeter, name: str, budget: float | None, action: Any, repeats: int
) -> Row:
    meter.reset()
    elapsed = 0.0
    for i in range(repeats):
        started = time.perf_counter()
        await action(i)
        elapsed += time.perf_counter() - started
    total = sum(meter.calls.values())
    detail = ", ".join(f"{op} {count / repeats:g}" for op, count in sorted(meter.calls.items()))
    overhead = (elapsed - meter.aws_seconds) / repeats * 1000
    return Row(name, total / repeats, detail, overhead, budget)


async def run(dynamodb_local: bool = False, sizes: Sizes = FULL) -> list[Row]:
    """Every scenario, DynamoDB on the emulator or (`dynamodb_local`) on DynamoDB Local; the
    calls are counted by the clients, so both count alike."""
    use_emulator_credentials()
    with contextlib.ExitStack() as running:
        emulator = running.enter_context(Emulator())
        tables = running.enter_context(DynamoDBLocal()).endpoint if dynamodb_local else None
        settings = Settings(
            table="bench",
            bucket="bench-data",
            long_poll_timeout=sizes.idle_wait_seconds,
            poll_interval=POLL_INTERVAL,
        )
        backend = build_backend(settings, endpoint=emulator.endpoint, dynamodb_endpoint=tables)
        ensure_resources(backend)
        meter = CallMeter()
        meter.attach_backend(backend)
        transport = httpx.ASGITransport(app=backend.app())
        # Streams created by another instance: this one has no memory of their tails.
        other = build_backend(settings, endpoint=emulator.endpoint, dynamodb_endpoint=tables)
        for i in range(sizes.repeats):
            other.store.create(f"cold-{i}", CreateSpec("text/plain"))
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            rows = await _scenarios(client, meter, sizes)
        rows += await _small_append_history(backend, other, meter, sizes)
        # The same store behind an app with access control on.
        secured = backend.settings.model_copy(update={"auth": True, "auth_secret": BENCH_KEY})
        transport = httpx.ASGITransport(app=create_app(secured, backend.store))
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            return rows + await _access_scenarios(client, meter, sizes.repeats)


BENCH_KEY = "benchmark-key-" + "k" * 32


async def _small_append_history(
    backend: Backend, writer: Backend, meter: CallMeter, sizes: Sizes
) -> list[Row]:
    """Catch-up reads of history written in small appends, per MiB read: by instances new to
    it (each read on a store of its own, as a Lambda instance that never met the stream),
    and by the instance that wrote it; before the sealer ran and after."""
    path = "small-history"
    writer.store.create(path, CreateSpec("text/plain"))
    body = b"s" * sizes.history_append_bytes
    for _ in range(sizes.history_bytes // sizes.history_append_bytes):
        writer.store.append(path, AppendIntent("text/plain", True, False), Payload(body))

    def fresh() -> DynamoStore:
        settings = backend.settings
        return DynamoStore(backend.dynamodb, backend.s3, settings.table, settings.bucket)

    async def read_on(store: DynamoStore) -> int:
        transport = httpx.ASGITransport(app=create_app(backend.settings, store))
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            offset, read = "-1", 0
            while True:
                response = await client.get(f"/v1/stream/{path}", params={"offset": offset})
                assert response.status_code == 200, response.text
                read += len(response.content)
                offset = response.headers["Stream-Next-Offset"]
                if response.headers.get("Stream-Up-To-Date") == "true":
                    return read

    async def per_mib(name: str, budget: float | None, store: Any) -> Row:
        meter.reset()
        started, read = time.perf_counter(), 0
        for _ in range(HISTORY_READS):
            read += await read_on(store() if callable(store) else store)
        elapsed = time.perf_counter() - started
        mib = read / MIB
        detail = ", ".join(f"{op} {count / mib:.2f}" for op, count in sorted(meter.calls.items()))
        overhead = (elapsed - meter.aws_seconds) / mib * 1000
        return Row(name, sum(meter.calls.values()) / mib, detail, overhead, budget)

    meter.attach_backend(writer)  # its store reads through its own clients
    size = f"{sizes.history_bytes // MIB} MiB in {sizes.history_append_bytes // 1024} KiB appends"
    rows = [
        await per_mib(f"per MiB of {size}, new instance", SMALL_HISTORY_BUDGETS["chunks"], fresh),
        await per_mib(f"per MiB of {size}, the writer", SMALL_HISTORY_BUDGETS["chunks"],
                      writer.store),
    ]  # fmt: skip
    Sealer(writer.store, seal_policy(backend.settings)).seal(path)
    rows += [
        await per_mib(f"per MiB of {size}, sealed, new instance", SMALL_HISTORY_BUDGETS["sealed"],
                      fresh),
        await per_mib(f"per MiB of {size}, sealed, the writer", SMALL_HISTORY_BUDGETS["sealed"],
                      writer.store),
    ]  # fmt: skip
    return rows


async def _access_scenarios(client: httpx.AsyncClient, meter: CallMeter, repeats: int) -> list[Row]:
    """A refusal costs no AWS call; a verified token costs what the request costs anyway."""
    keys = parse_key_set(BENCH_KEY)
    writer = mint_token(keys, parse_grants("create,append:*"), lifetime=600, audience=AUDIENCE)
    stale = mint_token(keys, parse_grants("append:*"), lifetime=60, audience=AUDIENCE, now=1e9)
    url, text = "/v1/stream/secured", {"Content-Type": "text/plain"}
    await client.put(url, headers={**text, "Authorization": f"Bearer {writer}"})

    def append(token: str | None, status: int) -> Any:
        headers = {**text, **({"Authorization": f"Bearer {token}"} if token else {})}

        async def action(i: int) -> None:
            response = await client.post(url, content=b"x" * 100, headers=headers)
            assert response.status_code == status, response.text

        return action

    return [
        await measure(
            meter, "append with a token (HS256 verified)", 2, append(writer, 204), repeats
        ),
        await measure(meter, "append refused: no token (401)", 0, append(None, 401), repeats),
        await measure(meter, "append refused: expired token (401)", 0, append(stale, 401), repeats),
    ]


async def _scenarios(client: httpx.AsyncClient, meter: CallMeter, sizes: Sizes) -> list[Row]:
    repeats = sizes.repeats
    base = "/v1/stream"
    text = {"Content-Type": "text/plain"}
    await client.put(f"{base}/small", headers=text)
    await client.put(f"{base}/large", headers={"Content-Type": "application/octet-stream"})
    await client.put(f"{base}/producer", headers=text)
    await client.put(f"{base}/idle", headers=text)
    await client.put(f"{base}/long", headers=text)

    async def first_append(i: int) -> None:
        response = await client.post(f"{base}/cold-{i}", content=b"x" * 100, headers=text)
        assert response.status_code == 204

    async def small_append(i: int) -> None:
        response = await client.post(f"{base}/small", content=b"x" * 100, headers=text)
        assert response.status_code == 204

    large_body = b"L" * (256 * 1024)

    async def large_append(i: int) -> None:
        response = await client.post(
            f"{base}/large",
            content=large_body,
            headers={"Content-Type": "application/octet-stream"},
        )
        assert response.status_code == 204

    async def catch_up_read(i: int) -> None:
        response = await client.get(f"{base}/small", params={"offset": "-1"})
        assert response.status_code == 200 and len(response.content) == 100 * repeats

    async def producer_append(i: int) -> None:
        headers = {**text, "Producer-Id": "bench", "Producer-Epoch": "0", "Producer-Seq": str(i)}
        response = await client.post(f"{base}/producer", content=b"p" * 100, headers=headers)
        assert response.status_code == 200

    # A full-size read: its body is measured as the front door would carry it (JSON escapes
    # of non-ASCII text), which costs time in proportion to the bytes returned.
    big_text = ("h\u00e9llo w\u00f6rld \u65e5\u672c\n" * 60_000).encode()[: 1024 * 1024]
    await client.put(f"{base}/big", headers=text, content=big_text)

    async def full_size_read(i: int) -> None:
        response = await client.get(f"{base}/big", params={"offset": "-1"})
        assert response.status_code == 200 and len(response.content) >= len(big_text) - 3

    rows = [
        await measure(meter, "small append, stream new to this instance", 2, first_append, repeats),
        await measure(meter, "small append (100 B, inline), same writer", 2, small_append, repeats),
        await measure(meter, "large append (256 KiB, S3)", 3, large_append, repeats),
        await measure(meter, "catch-up read (inline data)", 2, catch_up_read, repeats),
        await measure(meter, "catch-up read (1 MiB of text, S3)", 3, full_size_read, repeats),
        await measure(meter, "producer append (100 B)", 2, producer_append, repeats),
    ]

    # A long stream: reading its last few appends costs the same as reading a short one.
    for i in range(sizes.long_stream_appends):
        await client.post(f"{base}/long", content=b"%06d" % i, headers=text)
    head = await client.head(f"{base}/long")
    tail = int(head.headers["Stream-Next-Offset"].split("_")[1])
    near_end = f"{0:016d}_{tail - 60:016d}"

    async def tail_read(i: int) -> None:
        response = await client.get(f"{base}/long", params={"offset": near_end})
        assert response.status_code == 200 and len(response.content) == 60

    name = f"read last 10 of {sizes.long_stream_appends} appends"
    rows.append(await measure(meter, name, 2, tail_read, repeats))

    async def idle_long_poll(i: int) -> None:
        idle = await client.head(f"{base}/idle")
        offset = idle.headers["Stream-Next-Offset"]
        meter.reset()
        started = time.perf_counter()
        response = await client.get(
            f"{base}/idle", params={"offset": offset, "live": "long-poll"}, timeout=30
        )
        assert response.status_code == 204
        idle_seconds.append(time.perf_counter() - started)

    idle_seconds: list[float] = []
    await idle_long_poll(0)
    waited = statistics.fmean(idle_seconds)
    per_second = sum(meter.calls.values()) / waited
    detail = ", ".join(f"{op} {count}" for op, count in sorted(meter.calls.items()))
    rows.append(
        Row(
            f"idle long-poll, per second ({waited:.1f} s wait, poll {POLL_INTERVAL:g} s)",
            per_second,
            detail,
            None,
            1 / POLL_INTERVAL + 1,
        )
    )
    only_get_item = set(meter.calls) <= {"GetItem"}
    if not only_get_item:
        rows[-1].budget = 0  # an idle wait must cost consistent GetItems and nothing else
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dynamodb-local", action="store_true", help="DynamoDB on DynamoDB Local, S3 emulated"
    )
    parser.add_argument("--quick", action="store_true", help="less work, the same budgets")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args.dynamodb_local, QUICK if args.quick else FULL))
    print(f"{'operation':<52} {'AWS calls/op':>12} {'budget':>7} {'overhead ms':>12}  calls")
    for row in rows:
        budget = "-" if row.budget is None else f"{row.budget:g}"
        overhead = "-" if row.overhead_ms is None else f"{row.overhead_ms:.2f}"
        flag = "" if row.ok else "  OVER BUDGET"
        print(
            f"{row.operation:<52} {row.calls_per_op:>12.2f} {budget:>7} {overhead:>12}  "
            f"{row.detail}{flag}"
        )
    where = "DynamoDB Local" if args.dynamodb_local else "the emulator, in-process"
    print(f"overhead = wall time per request minus time inside AWS calls ({where})")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
