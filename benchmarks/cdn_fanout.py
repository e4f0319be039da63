"""Live readers through the local CDN: what one append costs the origin, whatever the readers.

Starts the server in-process on the embedded emulator (so its AWS calls are counted with
botocore hooks, as `benchmarks/aws_calls.py` does), nginx in front of it configured like the
CloudFront distribution, and N long-poll readers on one stream through nginx. A writer appends
messages spaced apart; every reader must receive every message exactly once and in order.
Prints, for each reader count: origin requests per append, AWS calls per append, the CDN's
hit ratio and the delivery latency (from the moment an append is sent to the moment a reader
has it) at p50 and p99. Then it watches idle live readers (nothing appended) straight to the
origin and through the CDN, and prints what one costs per hour in requests and AWS calls.

    python -m benchmarks.cdn_fanout [--readers 10 100 500] [--appends 20] [--spacing 1.0]

The figure to reach: origin requests per append at or below 2 for every reader count.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from benchmarks._processes import free_port
from benchmarks._report import per_operation, print_table
from benchmarks._stats import percentile_ms
from benchmarks.aws_calls import CallMeter
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.local_cdn import LocalCdn, install_nginx

ORIGIN_REQUESTS_PER_APPEND_BUDGET = 2.0
STREAM_HEADERS = ("stream-next-offset", "stream-cursor")


class RequestCounter:
    """Counts the requests that reach the origin, by method, the read keys they asked for,
    and the body bytes the reads answered with."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.methods: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.read_bytes = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            if scope["type"] == "http":
                self.methods[scope["method"]] += 1
            await self.app(scope, receive, send)
            return
        self.methods["GET"] += 1
        self.reads[f"{scope['path']}?{scope['query_string'].decode()}"] += 1

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.body":
                self.read_bytes += len(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, counted)

    def reset(self) -> None:
        self.methods.clear()
        self.reads.clear()
        self.read_bytes = 0


@dataclass
class Rig:
    """The origin (in-process, counted) with the local CDN in front."""

    backend: Backend
    counter: RequestCounter
    meter: CallMeter
    origin_url: str
    cdn: LocalCdn

    @property
    def cdn_url(self) -> str:
        return self.cdn.base_url

    def stream_url(self, base: str, name: str) -> str:
        return f"{base}{self.backend.settings.base_path}/{name}"


@contextlib.contextmanager
def rig(**settings: Any) -> Iterator[Rig]:
    install_nginx()
    use_emulator_credentials()
    with Emulator() as emulator:
        suffix = uuid.uuid4().hex[:10]
        config = Settings(table=f"cdn-{suffix}", bucket=f"cdn-{suffix}", **settings)
        backend = build_backend(config, endpoint=emulator.endpoint)
        ensure_resources(backend)
        meter = CallMeter()
        meter.attach_backend(backend)
        counter = RequestCounter(backend.app())
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(counter, host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        try:
            with LocalCdn(free_port(), port) as cdn:
                yield Rig(backend, counter, meter, f"http://127.0.0.1:{port}", cdn)
        finally:
            server.should_exit = True
            thread.join(timeout=10)


# ------------------------------------------------------------------ live fan-out


@dataclass
class FanoutResult:
    readers: int
    via_cdn: bool
    appends: int
    origin_reads: int
    aws_calls: Counter[str]
    reader_requests: int
    cache_statuses: Counter[str]
    latencies: list[float]
    problems: list[str] = field(default_factory=list)
    lag: float = 0.0  # the most a reader slept between two polls (seconds)

    @property
    def origin_reads_per_append(self) -> float:
        return self.origin_reads / self.appends

    @property
    def aws_calls_per_append(self) -> float:
        return sum(self.aws_calls.values()) / self.appends

    def aws_call_detail(self) -> str:
        return per_operation(self.aws_calls, self.appends, ".1f")

    @property
    def hit_ratio(self) -> float:
        total = sum(self.cache_statuses.values())
        return self.cache_statuses["HIT"] / total if total else 0.0

    def percentile_ms(self, fraction: float) -> float:
        return percentile_ms(self.latencies, fraction)


async def fanout(
    rig: Rig,
    readers: int,
    appends: int,
    spacing: float,
    via_cdn: bool = True,
    lag: float = 0.0,
) -> FanoutResult:
    """`readers` long-poll readers through the CDN (or straight to the origin); `appends` JSON
    messages about `spacing` seconds apart, written straight to the origin. With `lag`, each
    reader sleeps 0 to `lag` seconds (at random) between two polls, as readers that fall a
    little behind do: their keys' cached answers may have expired by the time they ask."""
    name = f"fanout-{uuid.uuid4().hex[:8]}"
    timeout = httpx.Timeout(60.0)
    async with httpx.AsyncClient(timeout=timeout) as client:
        origin_stream = rig.stream_url(rig.origin_url, name)
        created = await client.put(origin_stream, headers={"Content-Type": "application/json"})
        assert created.status_code == 201, created.text
        start = created.headers["stream-next-offset"]
        sent_at: dict[int, float] = {}
        received: list[list[tuple[int, float]]] = [[] for _ in range(readers)]
        requests = Counter[int]()
        everyone_waiting = asyncio.Event()
        waiting = 0

        async def read(index: int) -> None:
            # A client of its own per reader: one shared pool scans all its connections on
            # every request, which at hundreds of readers measures httpx, not the CDN.
            async with httpx.AsyncClient(timeout=timeout) as own:
                await follow(index, own)

        async def follow(index: int, client: httpx.AsyncClient) -> None:
            nonlocal waiting
            offset, cursor = start, None
            first = True
            pauses = random.Random(index)
            url = rig.stream_url(rig.cdn_url if via_cdn else rig.origin_url, name)
            while len(received[index]) < appends:
                params = {"offset": offset, "live": "long-poll"}
                if cursor is not None:
                    params["cursor"] = cursor
                request = client.get(url, params=params)
                if first:
                    waiting += 1
                    if waiting == readers:
                        everyone_waiting.set()
                    first = False
                response = await request
                requests[index] += 1
                now = time.perf_counter()
                if response.status_code == 200:
                    received[index].extend((m["seq"], now) for m in response.json())
                elif response.status_code != 204:
                    raise AssertionError(f"reader {index}: {response.status_code} {response.text}")
                offset = response.headers["stream-next-offset"]
                cursor = response.headers.get("stream-cursor", cursor)
                if lag > 0:
                    await asyncio.sleep(pauses.uniform(0, lag))

        # Everything the readers cost is counted, from their first request on.
        rig.counter.reset()
        rig.meter.reset()
        cdn_log_start = rig.cdn.access_log.stat().st_size
        tasks = [asyncio.create_task(read(i)) for i in range(readers)]
        await everyone_waiting.wait()
        await asyncio.sleep(0.5)  # let the first round of long-polls reach the CDN
        gaps = random.Random(appends)
        for seq in range(appends):
            sent_at[seq] = time.perf_counter()
            body = json.dumps({"seq": seq})
            appended = await client.post(
                origin_stream, content=body, headers={"Content-Type": "application/json"}
            )
            assert appended.status_code == 204, appended.text
            # Irregular gaps (fixed seed): evenly spaced appends would always land at the same
            # point of the cache's own timers and measure that point, not the CDN.
            await asyncio.sleep(spacing * gaps.uniform(0.5, 1.5))
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60 + appends * spacing)

    statuses = _statuses_since(rig, cdn_log_start)
    problems = []
    latencies = []
    for index, messages in enumerate(received):
        sequence = [seq for seq, _ in messages]
        if sequence != list(range(appends)):
            problems.append(f"reader {index} received {sequence}")
        latencies.extend(at - sent_at[seq] for seq, at in messages if seq in sent_at)
    return FanoutResult(
        readers=readers,
        via_cdn=via_cdn,
        appends=appends,
        origin_reads=rig.counter.methods["GET"],
        aws_calls=Counter(rig.meter.calls),
        reader_requests=sum(requests.values()),
        cache_statuses=statuses,
        latencies=latencies,
        problems=problems,
        lag=lag,
    )


def _statuses_since(rig: Rig, offset: int) -> Counter[str]:
    time.sleep(0.2)  # nginx writes its access log line after the response
    with open(rig.cdn.access_log, "rb") as log:
        log.seek(offset)
        lines = log.read().decode().splitlines()
    statuses: Counter[str] = Counter()
    for line in lines:
        parts = line.split(" ")
        if parts[0] == "GET" and len(parts) > 3:
            statuses[parts[3]] += 1
    return statuses


# ------------------------------------------------------------------ idle readers


@dataclass
class IdleResult:
    readers: int
    via_cdn: bool
    seconds: float
    origin_reads: int
    aws_calls: int
    reader_requests: int

    def per_reader_hour(self, count: int) -> float:
        return count * 3600 / self.seconds / self.readers


async def idle(rig: Rig, readers: int, seconds: float, via_cdn: bool) -> IdleResult:
    """`readers` long-polling one stream that nothing is written to, for `seconds`."""
    name = f"idle-{uuid.uuid4().hex[:8]}"
    base = rig.cdn_url if via_cdn else rig.origin_url
    async with httpx.AsyncClient(timeout=60) as client:
        created = await client.put(rig.stream_url(rig.origin_url, name))
        tail = created.headers["stream-next-offset"]
    requests = 0
    rig.counter.reset()
    rig.meter.reset()

    async def read() -> None:
        nonlocal requests
        cursor = None
        async with httpx.AsyncClient(timeout=60) as client:
            while True:
                params = {"offset": tail, "live": "long-poll"}
                if cursor is not None:
                    params["cursor"] = cursor
                requests += 1  # counted as it is sent, as the origin counts it on arrival
                response = await client.get(rig.stream_url(base, name), params=params)
                assert response.status_code == 204, response.status_code
                cursor = response.headers.get("stream-cursor", cursor)

    tasks = [asyncio.create_task(read()) for _ in range(readers)]
    await asyncio.sleep(seconds)
    origin_reads, aws_calls = rig.counter.methods["GET"], sum(rig.meter.calls.values())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return IdleResult(readers, via_cdn, seconds, origin_reads, aws_calls, requests)


# ------------------------------------------------------------------ report


FANOUT_COLUMNS = (
    "readers",
    "reader lag",
    "path",
    "appends",
    "origin requests / append",
    "AWS calls / append",
    "CDN hit ratio",
    "latency p50",
    "latency p99",
    "AWS calls / append, by operation",
)


def print_fanout_table(results: list[FanoutResult]) -> None:
    rows = (
        [
            r.readers,
            f"0-{r.lag * 1000:.0f} ms" if r.lag else "-",
            _path(r.via_cdn),
            r.appends,
            f"{r.origin_reads_per_append:.2f}",
            f"{r.aws_calls_per_append:.1f}",
            f"{r.hit_ratio:.1%}",
            f"{r.percentile_ms(0.5):.0f} ms",
            f"{r.percentile_ms(0.99):.0f} ms",
            r.aws_call_detail(),
        ]
        for r in results
    )
    print_table(FANOUT_COLUMNS, ">><>>>>>><", rows)


def _path(via_cdn: bool) -> str:
    return "CDN" if via_cdn else "origin"


def print_idle_table(results: list[IdleResult], timeout: float) -> None:
    print(f"\nidle live readers (long-poll timeout {timeout:g} s), per reader and hour:\n")
    columns = ("readers", "path", "reader requests", "origin requests", "AWS calls")
    rows = (
        [
            r.readers,
            _path(r.via_cdn),
            f"{r.per_reader_hour(r.reader_requests):.0f}",
            f"{r.per_reader_hour(r.origin_reads):.1f}",
            f"{r.per_reader_hour(r.aws_calls):.0f}",
        ]
        for r in results
    )
    print_table(columns, "><>>>", rows)


async def main_async(
    readers: list[int], appends: int, spacing: float, idle_cycles: int, lag: float = 0.0
) -> int:
    results = []
    idle_results = []
    with rig() as running:
        # A baseline without the CDN: every reader is an origin request per append.
        results.append(await fanout(running, 10, appends, spacing, via_cdn=False))
        for count in readers:
            results.append(await fanout(running, count, appends, spacing))
            if lag > 0:
                results.append(await fanout(running, count, appends, spacing, lag=lag))
        # Whole cycles (every request counted once, as it starts), less a moment.
        idle_seconds = idle_cycles * running.backend.settings.long_poll_timeout - 0.5
        if idle_cycles > 0:
            idle_results.append(await idle(running, 10, idle_seconds, via_cdn=False))
            idle_results.append(await idle(running, 100, idle_seconds, via_cdn=True))
        timeout = running.backend.settings.long_poll_timeout
    print_fanout_table(results)
    if idle_results:
        print_idle_table(idle_results, timeout)
    failed = False
    for result in results:
        for problem in result.problems[:5]:
            print(f"{result.readers} readers: {problem}", file=sys.stderr)
        if result.problems:
            failed = True
        over = result.origin_reads_per_append > ORIGIN_REQUESTS_PER_APPEND_BUDGET
        if result.via_cdn and over:
            print(
                f"{result.readers} readers: {result.origin_reads_per_append:.2f} origin requests "
                f"per append, over the budget of {ORIGIN_REQUESTS_PER_APPEND_BUDGET}",
                file=sys.stderr,
            )
            failed = True
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--appends", type=int, default=20)
    parser.add_argument(
        "--spacing", type=float, default=1.0, help="mean seconds between appends (±50%%)"
    )
    parser.add_argument(
        "--idle-cycles",
        type=int,
        default=4,
        help="long-poll timeouts to watch idle readers for, with and without the CDN (0: none)",
    )
    parser.add_argument(
        "--lag-ms",
        type=float,
        default=0.0,
        help="also measure readers that sleep 0 to this many ms (at random) between polls",
    )
    args = parser.parse_args(argv)
    lag = args.lag_ms / 1000
    return asyncio.run(main_async(args.readers, args.appends, args.spacing, args.idle_cycles, lag))


if __name__ == "__main__":
    sys.exit(main())
