"""Live readers through the local CDN: what one append costs the origin, whatever the readers.

Runs the origin (in this process on the embedded emulator, its AWS calls counted with botocore
hooks as `benchmarks/aws_calls.py` does; or `dsaws serve --cdn-port` in a process of its own,
on the embedded emulator or on `--aws` against the emulator in yet another process, which
counts the calls), nginx in front of it configured like the CloudFront distribution, and N
long-poll readers of one stream through nginx. A writer appends messages spaced apart; every
reader must receive every message exactly once and in order. With `--lag-ms`, each reader
count is measured again with readers that sleep 0 to that many ms (at random) between polls,
as readers that fall a little behind do. Prints, for each row: origin requests and origin data
reads (answers with data) per append, the most origin reads of one cache key, AWS calls per
append, the CDN's hit ratio and cache statuses, and the delivery latency (from the moment an
append is sent to the moment a reader has it) at p50 and p99. Then it watches idle live
readers (nothing appended) straight to the origin and through the CDN, and prints what one
costs per hour in requests and AWS calls.

    python -m benchmarks.cdn_fanout [--readers 10 100 500] [--appends 20] [--spacing 1.0]
        [--lag-ms 500] [--origin in-process|serve|serve-aws] [--long-poll-timeout 15]

The target (issue 32): at most 2 origin data reads per append through the CDN, whatever the
readers, lagging ones included; the last line says whether it is met, and the exit status is
1 if it is not or a reader missed or repeated a message. Readers only reach a long-poll key
whose cached answer has expired when they fall more than a long-poll behind, so the lagging
rows test that with a long-poll timeout shorter than their pauses (`--long-poll-timeout 0.2`,
as readers 15 to 40 s behind with the deployed 15 s do).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from benchmarks._processes import counted_emulator, dsaws_serve, free_port
from benchmarks._report import per_operation, print_table
from benchmarks._stats import percentile_ms
from benchmarks.aws_calls import CallMeter
from benchmarks.counted_emulator import CALLS_PATH
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.local_cdn import LocalCdn, install_nginx

# Issue 32: fan-out flat in the reader count, lagging readers included.
ORIGIN_DATA_READS_PER_APPEND_TARGET = 2.0
SERVE_BASE_PATH = Settings().base_path  # where `dsaws serve` puts streams, unless told


class RequestCounter:
    """Counts the requests that reach the origin, by method, the read keys they asked for,
    and the body bytes the reads answered with."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.methods: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.read_statuses: Counter[int] = Counter()
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
            if message["type"] == "http.response.start":
                self.read_statuses[message["status"]] += 1
            if message["type"] == "http.response.body":
                self.read_bytes += len(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, counted)

    def reset(self) -> None:
        self.methods.clear()
        self.reads.clear()
        self.read_statuses.clear()
        self.read_bytes = 0


@dataclass
class OriginReads:
    by_key: Counter[str]  # GETs that reached the origin, by read URL (path and query)
    data: int  # of which answered 200 (with data)

    @property
    def total(self) -> int:
        return sum(self.by_key.values())

    @property
    def busiest(self) -> int:
        """The most origin reads of one key: a cache that collapses reads of an expired key
        keeps it at 2 (the first read, and one refresh)."""
        return max(self.by_key.values(), default=0)


class FanoutRig(Protocol):
    """What the fan-out needs of a rig: where the origin and the CDN are, and what reached the
    origin since `reset_counts`."""

    label: str
    origin_url: str

    @property
    def cdn_url(self) -> str: ...

    @property
    def long_poll_timeout(self) -> float: ...

    @property
    def access_log(self) -> Path: ...

    def stream_url(self, base: str, name: str) -> str: ...

    def reset_counts(self) -> None: ...

    def origin_reads(self) -> OriginReads:
        """The GETs that reached the origin since `reset_counts`."""
        ...

    def aws_calls(self) -> Counter[str] | None:
        """The AWS calls since `reset_counts`, by operation; None where they are not counted."""
        ...


@dataclass
class Rig:
    """The origin (in-process, counted) with the local CDN in front."""

    backend: Backend
    counter: RequestCounter
    meter: CallMeter
    origin_url: str
    cdn: LocalCdn
    label: str = "in-process, embedded emulator"

    @property
    def cdn_url(self) -> str:
        return self.cdn.base_url

    @property
    def access_log(self) -> Path:
        return self.cdn.access_log

    @property
    def long_poll_timeout(self) -> float:
        return self.backend.settings.long_poll_timeout

    def stream_url(self, base: str, name: str) -> str:
        return f"{base}{self.backend.settings.base_path}/{name}"

    def reset_counts(self) -> None:
        self.counter.reset()
        self.meter.reset()

    def origin_reads(self) -> OriginReads:
        return OriginReads(Counter(self.counter.reads), self.counter.read_statuses[200])

    def aws_calls(self) -> Counter[str] | None:
        return Counter(self.meter.calls)


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


@dataclass
class ServeRig:
    """`dsaws serve --cdn-port` in a process of its own, as a user runs it: on the embedded
    emulator, or on `--aws` against the emulator in yet another process (which counts the AWS
    calls). What reaches the origin is read from the local CDN's access log: a request nginx
    passed upstream names the upstream's address there."""

    label: str
    origin_url: str
    cdn_url: str
    access_log: Path
    calls_url: str | None
    long_poll_timeout: float
    _log_start: int = 0

    def stream_url(self, base: str, name: str) -> str:
        return f"{base}{SERVE_BASE_PATH}/{name}"

    def reset_counts(self) -> None:
        self._log_start = self.access_log.stat().st_size
        if self.calls_url is not None:
            httpx.delete(self.calls_url).raise_for_status()

    def origin_reads(self) -> OriginReads:
        reads = OriginReads(Counter(), 0)
        for entry in _log_entries(self.access_log, self._log_start):
            if entry.method == "GET" and entry.upstream != "-":
                reads.by_key[entry.uri] += 1
                reads.data += entry.status == "200"
        return reads

    def aws_calls(self) -> Counter[str] | None:
        if self.calls_url is None:
            return None
        return Counter(httpx.get(self.calls_url).json())


@contextlib.contextmanager
def serve_rig(aws: bool, long_poll_timeout: float = 15.0) -> Iterator[ServeRig]:
    """`dsaws serve --cdn-port`; with `aws`, on `--aws` against `benchmarks.counted_emulator`
    in a process of its own."""
    install_nginx()
    with contextlib.ExitStack() as stack:
        args = ["--long-poll-timeout", f"{long_poll_timeout:g}"]
        env = None
        calls_url = None
        label = "dsaws serve, embedded emulator"
        if aws:
            endpoint = stack.enter_context(counted_emulator())
            env = {"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
            env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
            name = f"cdn-{uuid.uuid4().hex[:10]}"
            args += ["--aws", "--table", name, "--bucket", name]
            calls_url = f"{endpoint}{CALLS_PATH}"
            label = "dsaws serve --aws, emulator apart"
        cdn_port = free_port()
        streams = stack.enter_context(dsaws_serve(*args, "--cdn-port", str(cdn_port), env=env))
        yield ServeRig(
            label,
            streams.removesuffix(SERVE_BASE_PATH),
            f"http://127.0.0.1:{cdn_port}",
            _cdn_access_log(cdn_port),
            calls_url,
            long_poll_timeout,
        )


def _cdn_access_log(cdn_port: int) -> Path:
    """The access log of the local CDN `dsaws serve` started on `cdn_port` (in the private
    directory it made for nginx, which names the port in its configuration)."""
    listen = f"listen 127.0.0.1:{cdn_port};"
    for conf in Path(tempfile.gettempdir()).glob("dsaws-cdn-*/nginx.conf"):
        with contextlib.suppress(OSError):
            if listen in conf.read_text():
                return conf.parent / "access.log"
    raise RuntimeError(f"no local CDN configuration listens on port {cdn_port}")


@dataclass(frozen=True)
class LogEntry:
    method: str
    uri: str
    status: str
    cache_status: str
    upstream: str


def _log_entries(access_log: Path, offset: int) -> list[LogEntry]:
    """The local CDN's access log from byte `offset` on (its `cdn` format: method, URI,
    status, cache status, upstream address, time)."""
    time.sleep(0.2)  # nginx writes its access log line after the response
    with open(access_log, "rb") as log:
        log.seek(offset)
        lines = log.read().decode().splitlines()
    entries = []
    for line in lines:
        parts = line.split(" ")
        if len(parts) >= 5:
            entries.append(LogEntry(*parts[:5]))
    return entries


# ------------------------------------------------------------------ live fan-out


@dataclass
class FanoutResult:
    readers: int
    via_cdn: bool
    appends: int
    origin_reads: int
    origin_data_reads: int  # the origin reads answered with data (200)
    busiest_key_reads: int  # the most origin reads of one read URL (cache key)
    aws_calls: Counter[str] | None  # None where the rig cannot count them
    reader_requests: int
    cache_statuses: Counter[str]
    latencies: list[float]
    problems: list[str] = field(default_factory=list)
    lag: float = 0.0  # the most a reader slept between two polls (seconds)

    @property
    def origin_reads_per_append(self) -> float:
        return self.origin_reads / self.appends

    @property
    def origin_data_reads_per_append(self) -> float:
        return self.origin_data_reads / self.appends

    @property
    def meets_target(self) -> bool:
        return self.origin_data_reads_per_append <= ORIGIN_DATA_READS_PER_APPEND_TARGET

    @property
    def aws_calls_per_append(self) -> float | None:
        if self.aws_calls is None:
            return None
        return sum(self.aws_calls.values()) / self.appends

    def aws_call_detail(self) -> str:
        if self.aws_calls is None:
            return "-"
        return per_operation(self.aws_calls, self.appends, ".1f")

    def cache_status_detail(self) -> str:
        return ", ".join(f"{name} {count}" for name, count in self.cache_statuses.most_common())

    @property
    def hit_ratio(self) -> float:
        total = sum(self.cache_statuses.values())
        return self.cache_statuses["HIT"] / total if total else 0.0

    def percentile_ms(self, fraction: float) -> float:
        return percentile_ms(self.latencies, fraction)


async def fanout(
    rig: FanoutRig,
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
    # The writer's connection idles while hundreds of readers start; the server closes idle
    # connections after a few seconds, and reusing one it is closing fails the append.
    fresh = httpx.Limits(keepalive_expiry=1.0)
    async with httpx.AsyncClient(timeout=timeout, limits=fresh) as client:
        origin_stream = rig.stream_url(rig.origin_url, name)
        created = await client.put(origin_stream, headers={"Content-Type": "application/json"})
        assert created.status_code == 201, created.text
        start = created.headers["stream-next-offset"]
        sent_at: dict[int, float] = {}
        received: list[list[tuple[int, float]]] = [[] for _ in range(readers)]
        requests = Counter[int]()
        answered = Counter[int]()
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
                answered[response.status_code] += 1
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
        rig.reset_counts()
        cdn_log_start = rig.access_log.stat().st_size
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
    if via_cdn:
        reads = rig.origin_reads()
        origin_reads, origin_data_reads = reads.total, reads.data
        busiest = reads.busiest
    else:
        # Straight to the origin, every request is an origin request.
        origin_reads, origin_data_reads = sum(requests.values()), answered[200]
        busiest = 0
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
        origin_reads=origin_reads,
        origin_data_reads=origin_data_reads,
        busiest_key_reads=busiest,
        aws_calls=rig.aws_calls(),
        reader_requests=sum(requests.values()),
        cache_statuses=statuses,
        latencies=latencies,
        problems=problems,
        lag=lag,
    )


def _statuses_since(rig: FanoutRig, offset: int) -> Counter[str]:
    """The local CDN's cache statuses of the GETs it logged from byte `offset` on."""
    return Counter(
        e.cache_status for e in _log_entries(rig.access_log, offset) if e.method == "GET"
    )


# ------------------------------------------------------------------ idle readers


@dataclass
class IdleResult:
    readers: int
    via_cdn: bool
    seconds: float
    origin_reads: int
    aws_calls: int | None
    reader_requests: int

    def per_reader_hour(self, count: int) -> float:
        return count * 3600 / self.seconds / self.readers


async def idle(rig: FanoutRig, readers: int, seconds: float, via_cdn: bool) -> IdleResult:
    """`readers` long-polling one stream that nothing is written to, for `seconds`."""
    name = f"idle-{uuid.uuid4().hex[:8]}"
    base = rig.cdn_url if via_cdn else rig.origin_url
    async with httpx.AsyncClient(timeout=60) as client:
        created = await client.put(rig.stream_url(rig.origin_url, name))
        tail = created.headers["stream-next-offset"]
    requests = 0
    rig.reset_counts()

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
    calls = rig.aws_calls()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Straight to the origin, every request is an origin request.
    origin_reads = rig.origin_reads().total if via_cdn else requests
    aws_calls = None if calls is None else sum(calls.values())
    return IdleResult(readers, via_cdn, seconds, origin_reads, aws_calls, requests)


# ------------------------------------------------------------------ report


FANOUT_COLUMNS = (
    "readers",
    "reader lag",
    "path",
    "appends",
    "origin requests / append",
    "origin data reads / append",
    "most origin reads of one key",
    "AWS calls / append",
    "CDN hit ratio",
    "latency p50",
    "latency p99",
    "AWS calls / append, by operation",
    "CDN cache statuses",
)


def print_fanout_table(results: list[FanoutResult]) -> None:
    rows = (
        [
            r.readers,
            f"0-{r.lag * 1000:.0f} ms" if r.lag else "-",
            _path(r.via_cdn),
            r.appends,
            f"{r.origin_reads_per_append:.2f}",
            f"{r.origin_data_reads_per_append:.2f}",
            r.busiest_key_reads if r.via_cdn else "-",
            "-" if r.aws_calls_per_append is None else f"{r.aws_calls_per_append:.1f}",
            f"{r.hit_ratio:.1%}",
            f"{r.percentile_ms(0.5):.0f} ms",
            f"{r.percentile_ms(0.99):.0f} ms",
            r.aws_call_detail(),
            r.cache_status_detail() if r.via_cdn else "-",
        ]
        for r in results
    )
    print_table(FANOUT_COLUMNS, ">><>>>>>>>><<", rows)


def print_target(results: list[FanoutResult]) -> None:
    """Issue 32's target, for the most readers measured with lag (or without, if none)."""
    through_cdn = [r for r in results if r.via_cdn]
    if not through_cdn:
        return
    worst = max(through_cdn, key=lambda r: (r.lag > 0, r.readers, r.origin_data_reads))
    lag = f", lag 0-{worst.lag * 1000:.0f} ms" if worst.lag else ""
    verdict = "met" if all(r.meets_target for r in through_cdn) else "NOT MET"
    print(
        f"\ntarget: origin data reads per append <= {ORIGIN_DATA_READS_PER_APPEND_TARGET:g} "
        f"through the CDN, whatever the readers ({worst.readers} readers{lag}: "
        f"{worst.origin_data_reads_per_append:.2f}): {verdict}"
    )


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
            "-" if r.aws_calls is None else f"{r.per_reader_hour(r.aws_calls):.0f}",
        ]
        for r in results
    )
    print_table(columns, "><>>>", rows)


ORIGINS = ("in-process", "serve", "serve-aws")


@contextlib.contextmanager
def origin_rig(origin: str, long_poll_timeout: float = 15.0) -> Iterator[FanoutRig]:
    """in-process: the app in this process on the embedded emulator, its AWS calls counted with
    botocore hooks; serve: `dsaws serve --cdn-port` on the embedded emulator; serve-aws: `dsaws
    serve --aws --cdn-port` against the emulator in a process of its own (which counts the
    calls), as a deployment's function runs apart from DynamoDB and S3."""
    if origin == "in-process":
        with rig(long_poll_timeout=long_poll_timeout) as running:
            yield running
    else:
        with serve_rig(origin == "serve-aws", long_poll_timeout) as running:
            yield running


async def main_async(
    readers: list[int],
    appends: int,
    spacing: float,
    idle_cycles: int,
    lag: float = 0.0,
    origin: str = "in-process",
    baseline: bool = True,
    long_poll_timeout: float = 15.0,
) -> int:
    results = []
    idle_results = []
    with origin_rig(origin, long_poll_timeout) as running:
        print(f"origin: {running.label}", flush=True)
        if baseline:
            # Without the CDN: every reader is an origin request per append.
            results.append(await fanout(running, 10, appends, spacing, via_cdn=False))
        for count in readers:
            results.append(await fanout(running, count, appends, spacing))
            if lag > 0:
                results.append(await fanout(running, count, appends, spacing, lag=lag))
        # Whole cycles (every request counted once, as it starts), less a moment.
        timeout = running.long_poll_timeout
        idle_seconds = idle_cycles * timeout - 0.5
        if idle_cycles > 0:
            idle_results.append(await idle(running, 10, idle_seconds, via_cdn=False))
            idle_results.append(await idle(running, 100, idle_seconds, via_cdn=True))
    print_fanout_table(results)
    print_target(results)
    if idle_results:
        print_idle_table(idle_results, timeout)
    failed = False
    for result in results:
        for problem in result.problems[:5]:
            print(f"{result.readers} readers: {problem}", file=sys.stderr)
        if result.problems:
            failed = True
        if result.via_cdn and not result.meets_target:
            print(
                f"{result.readers} readers: {result.origin_data_reads_per_append:.2f} origin "
                f"data reads per append, over the target of "
                f"{ORIGIN_DATA_READS_PER_APPEND_TARGET:g}",
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
        default=500.0,
        help="also measure readers that sleep 0 to this many ms (at random) between polls "
        "(0: none)",
    )
    parser.add_argument(
        "--origin",
        choices=ORIGINS,
        default="in-process",
        help="how the origin runs (see origin_rig)",
    )
    parser.add_argument(
        "--long-poll-timeout",
        type=float,
        default=15.0,
        help="seconds the origin's long-polls wait (DS_LONG_POLL_TIMEOUT, 15 by default)",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="leave out the row of readers straight to the origin",
    )
    args = parser.parse_args(argv)
    run = main_async(
        args.readers,
        args.appends,
        args.spacing,
        args.idle_cycles,
        args.lag_ms / 1000,
        args.origin,
        baseline=not args.no_baseline,
        long_poll_timeout=args.long_poll_timeout,
    )
    return asyncio.run(run)


if __name__ == "__main__":
    sys.exit(main())
