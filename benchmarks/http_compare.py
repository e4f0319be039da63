"""The same HTTP scenarios against the upstream reference server and against `dsaws serve`, in
one run, side by side.

Two servers, one after the other (never both at once: the machine has two cores), each in a
process of its own on loopback:

- reference: npm @durable-streams/server (pinned in benchmarks/node), in memory, its defaults;
- ours: `dsaws serve`, as the README starts it (the embedded emulator inside the server's
  process, its data journaled to disk, the background sealer on), in a fresh temporary
  `--data-dir`; with `--in-memory`, `dsaws serve --in-memory` instead (no journal, as the
  reference keeps its streams).

The client is this process: httpx (async, HTTP/1.1, keep-alive), the same code for both servers,
with an httpx client of its own for each concurrent reader or writer (one client shared by 50
connections spends more CPU per request than the reference server does). It asks for
uncompressed bodies (`Accept-Encoding: identity`): the reference server would gzip every read
above 1 KiB and ours never compresses (the CDN does), and on loopback compressing is pure cost.
Each server is warmed up (every request kind below, a few times) before measuring, and the
client's own heap is frozen meanwhile, so that its full collections do not pause the
measurement of either server.

Every message is fixed-size and numbered (`<tag><number>:` padded with `x`), so a reader can cut
what it receives into messages. Every scenario reads back what it wrote and checks it byte for
byte: every message, once, in order. Any mismatch (or an unexpected HTTP status) is printed as
`WRONG:` and the exit status is 1; timings never fail the run.

1. append latency: sequential appends (100 B) to one stream, each awaited: p50/p99 ms. Again
   through the standard library's http.client (one kept-alive connection, blocking): httpx
   costs about 1 ms of client CPU per request on this machine, more than the reference server
   takes to append, so that second pair of rows is the fairer measure of the servers.
2. concurrent appends: 16 writers, each appending its messages sequentially, all at once; two
   rows: all into ONE shared stream (each writer's messages must appear in its order, all once)
   and each writer into its own stream. Total appends/s over the wall time. A third row: 32
   writers at once over 8 streams (four writers sharing each stream).
3. idempotent producer: our Python client (`core.client.IdempotentProducer` over
   `AsyncDurableStream`, on the benchmark's httpx client) appends 100 B messages and flushes;
   messages/s from the first append to the end of the flush. Two rows: the client's defaults
   (linger 5 ms, batches up to 1 MiB, 5 requests in flight) and one message per request, one
   request at a time, which measures the server's producer path rather than batching. A third
   row pipelines: one message per request, 5 requests in flight over several connections,
   where requests overtake each other (its 409s are listed under the table).
4. live delivery: one reader long-polls (`live=long-poll`) at the tail; the writer appends one
   message 100 ms after the reader received the previous one (so its next long-poll is
   waiting); latency from just before the append is sent to the reader having the body.
5. catch-up read: 5 MiB written in 64 KiB appends (the bulk write rate is shown too), then read
   from the start with catch-up GETs following `Stream-Next-Offset` until `Stream-Up-To-Date`
   (ours answers at most 1 MiB per response; the reference answers everything at once); the
   median of 3 reads, MB/s (1 MB = 10^6 bytes). Then the same 3 reads 8 s later: history,
   which ours has sealed into S3 segments by then (`dsaws serve` sweeps every 5 s), where a
   read just after the write still finds the data inline in DynamoDB.
6. catch-up read of small-append history: the same size written in 1 KiB appends (as chat
   messages and tokens arrive: thousands of items), read just after and 8 s later.
7. append latency over time: sequential 1 KiB appends for 12 s, in bursts of 4 s with 1.5 s
   of silence between them, after the writes above (so ours holds data, and its background
   sealer, which starts a sweep once the server has been quiet for a second, has history to
   move meanwhile): p50/p99/max ms, target p99 within 3x p50 (issue 32). The spikes and their
   causes: `python -m benchmarks.append_spikes`.
8. long-poll fan-out: 50 readers long-poll one stream; 20 appends start 100 ms apart; latency
   per (reader, append) from just before the append is sent to that reader having it.

Reading the table: `better` says which way is good for the row; `ratio` is ours / reference
for times and reference / ours for rates, so above 1 always means ours is worse by that factor.
The `target` column shows the figures the project must reach (met / NOT met). `client CPU` is
the benchmark process's CPU time over the measured part as a share of its wall time: near 100%,
the Python client set the pace and the server could have gone faster (so a ratio on that row
understates the gap). Answers of 400 and above that the client handled (a producer's resent
sequence gap, say) are listed under the table.

    python -m benchmarks.http_compare [--quick] [--only ours|reference] [--in-memory]
                                      [sizes, see --help]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import http.client
import math
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import httpx

from benchmarks import append_spikes
from benchmarks._processes import dsaws_serve, reference_server
from benchmarks._report import print_table
from benchmarks._stats import Timed, percentile_ms
from durable_streams_aws.client import (
    AsyncDurableStream,
    DurableStreamError,
    IdempotentProducer,
    ProducerSettings,
)

OCTETS = "application/octet-stream"
MB = 1_000_000
KIB = 1024


@dataclass(frozen=True)
class Sizes:
    append_count: int = 500
    append_bytes: int = 100
    writers: int = 16
    appends_per_writer: int = 100
    in_flight: int = 32  # writers at once over `in_flight_streams` streams
    in_flight_streams: int = 8
    producer_messages: int = 100_000
    unbatched_messages: int = 1_000
    live_appends: int = 50
    live_gap: float = 0.1  # seconds between a delivery and the next append
    catch_up_bytes: int = 5 * KIB * KIB
    catch_up_append_bytes: int = 64 * KIB
    # The same size written the way chat messages and tokens arrive: thousands of small appends.
    small_append_bytes: int = KIB
    catch_up_reads: int = 3
    # The same stream read again this much later: history (ours has sealed it into S3 by
    # then: `dsaws serve` sweeps every 5 s).
    history_after: float = 8.0
    # Sequential appends over time, with the server's background sweeps running among them.
    spread_seconds: float = 12.0
    spread_burst: float = 4.0
    spread_pause: float = 1.5
    readers: int = 50
    fan_out_appends: int = 20
    fan_out_spacing: float = 0.1  # seconds between the starts of two appends


# Small enough for a smoke test, yet the catch-up read still takes several responses from ours.
QUICK = Sizes(
    append_count=20,
    writers=4,
    appends_per_writer=10,
    in_flight=8,
    in_flight_streams=2,
    producer_messages=300,
    unbatched_messages=30,
    live_appends=3,
    live_gap=0.05,
    catch_up_bytes=3 * KIB * KIB,
    catch_up_reads=1,
    history_after=0.0,
    spread_seconds=1.0,
    spread_burst=0.5,
    spread_pause=0.2,
    readers=5,
    fan_out_appends=3,
)


# The sizes of `warm_up`.
WARM_UP = dataclasses.replace(
    QUICK,
    appends_per_writer=5,
    producer_messages=50,
    unbatched_messages=10,
    live_appends=2,
    live_gap=0.02,
    catch_up_bytes=256 * KIB,
    catch_up_reads=2,
    readers=4,
    fan_out_appends=2,
    fan_out_spacing=0.02,
)


class Failed(Exception):
    """What a scenario read back is not what it wrote, or a server answered unexpectedly."""


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    value: float
    lower_is_better: bool
    client_cpu: float  # this process's CPU time over the timed part, as a share of its wall time


@dataclass
class ServerRun:
    name: str
    description: str
    figures: dict[str, Figure] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, figures: list[Figure]) -> None:
        self.figures |= {figure.key: figure for figure in figures}


def latency_figures(
    key: str, label: str, seconds: list[float], timed: Timed, with_max: bool = False
) -> list[Figure]:
    figures = [
        Figure(f"{key} p{q}", f"{label}, p{q}", "ms", percentile_ms(seconds, q / 100), True,
               timed.client_cpu)
        for q in (50, 99)
    ]  # fmt: skip
    if with_max:
        longest = 1000 * max(seconds, default=math.nan)
        figures.append(Figure(f"{key} max", f"{label}, max", "ms", longest, True, timed.client_cpu))
    return figures


# ---------------------------------------------------------------- messages and checks


def message(tag: str, i: int, size: int) -> bytes:
    """Message i of a writer `tag`: exactly `size` bytes, so streams cut into messages."""
    head = f"{tag}{i:07d}:".encode()
    if len(head) > size:
        raise ValueError(f"messages of {size} B cannot hold their number")
    return head + b"x" * (size - len(head))


def messages(tag: str, count: int, size: int) -> bytes:
    return b"".join(message(tag, i, size) for i in range(count))


def check_bytes(what: str, got: bytes, want: bytes) -> None:
    if got == want:
        return
    differs = next(
        (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )
    raise Failed(
        f"{what}: {len(got)} bytes read back, {len(want)} written; first difference at byte "
        f"{differs}: {got[differs : differs + 24]!r} instead of {want[differs : differs + 24]!r}"
    )


def check_interleaved(what: str, got: bytes, tags: list[str], count: int, size: int) -> None:
    """`got` holds every writer's `count` messages once, each writer's in order, in any
    interleaving of the writers."""
    if len(got) != len(tags) * count * size:
        raise Failed(f"{what}: {len(got)} bytes read back, {len(tags) * count * size} written")
    following = dict.fromkeys(tags, 0)
    for start in range(0, len(got), size):
        piece = got[start : start + size]
        tag = next((t for t in tags if piece.startswith(t.encode())), None)
        expected = None if tag is None else message(tag, following[tag], size)
        if tag is None or piece != expected:
            want = "a message of an unknown writer" if expected is None else repr(expected[:24])
            raise Failed(f"{what}: at byte {start}: {piece[:24]!r}..., expected {want}")
        following[tag] += 1


# ---------------------------------------------------------------- protocol requests


def stream_url(base: str, scenario: str) -> str:
    return f"{base}/http-compare-{scenario}-{uuid.uuid4().hex[:8]}"


def expect_status(response: httpx.Response, *statuses: int) -> None:
    if response.status_code not in statuses:
        raise Failed(
            f"{response.request.method} {response.request.url.path}: {response.status_code} "
            f"{response.text[:200]!r}, expected {' or '.join(map(str, statuses))}"
        )


async def create(client: httpx.AsyncClient, url: str) -> str:
    """Create an empty byte stream; returns its tail offset."""
    response = await client.put(url, headers={"Content-Type": OCTETS})
    expect_status(response, 201)
    return response.headers["Stream-Next-Offset"]


async def append(client: httpx.AsyncClient, url: str, body: bytes) -> None:
    response = await client.post(url, content=body, headers={"Content-Type": OCTETS})
    expect_status(response, 200, 204)


def read_params(offset: str, live: bool, cursor: str | None) -> list[tuple[str, str]]:
    """Query parameters in key order, as the protocol asks clients to send them."""
    params = [("cursor", cursor)] if cursor is not None else []
    return [*params, *([("live", "long-poll")] if live else []), ("offset", offset)]


async def read_all(client: httpx.AsyncClient, url: str) -> tuple[bytes, int]:
    """Catch-up GETs from the start, following `Stream-Next-Offset` until `Stream-Up-To-Date`;
    the bytes read and the number of responses."""
    pieces: list[bytes] = []
    offset, responses = "-1", 0
    while True:
        response = await client.get(url, params=read_params(offset, False, None))
        expect_status(response, 200)
        responses += 1
        pieces.append(response.content)
        if response.headers.get("Stream-Up-To-Date") == "true":
            return b"".join(pieces), responses
        following = response.headers["Stream-Next-Offset"]
        if following == offset or not response.content:
            raise Failed(f"GET {url}: no progress at offset {offset} and not up to date")
        offset = following


async def follow_live(
    client: httpx.AsyncClient,
    url: str,
    offset: str,
    total_bytes: int,
    received: Callable[[float, bytes], None],
) -> None:
    """Long-poll from `offset` until `total_bytes` have arrived; `received(when, body)` for
    each response with data, `when` taken as soon as its whole body is here."""
    cursor: str | None = None
    arrived = 0
    while arrived < total_bytes:
        response = await client.get(url, params=read_params(offset, True, cursor))
        when = time.perf_counter()
        expect_status(response, 200, 204)
        offset = response.headers["Stream-Next-Offset"]
        cursor = response.headers.get("Stream-Cursor", cursor)
        if response.status_code == 200 and response.content:
            arrived += len(response.content)
            received(when, response.content)


async def expect_stream(client: httpx.AsyncClient, url: str, want: bytes, what: str) -> None:
    got, _ = await read_all(client, url)
    check_bytes(what, got, want)


# ---------------------------------------------------------------- scenarios


async def append_latency(clients: Clients, base: str, sizes: Sizes) -> list[Figure]:
    client = clients.main
    url = stream_url(base, "latency")
    await create(client, url)
    seconds = []
    with Timed() as timed:
        for i in range(sizes.append_count):
            body = message("a", i, sizes.append_bytes)
            started = time.perf_counter()
            await append(client, url, body)
            seconds.append(time.perf_counter() - started)
    want = messages("a", sizes.append_count, sizes.append_bytes)
    await expect_stream(client, url, want, "append latency stream")
    label = f"append latency, {sizes.append_bytes} B, sequential ({sizes.append_count})"
    return latency_figures("append", label, seconds, timed)


async def append_latency_lean(clients: Clients, base: str, sizes: Sizes) -> list[Figure]:
    client = clients.main
    """Scenario 1 again through the standard library's blocking http.client: httpx spends
    about a millisecond of CPU per request here, more than the reference server takes, so this
    row shows the servers' own share."""
    url = stream_url(base, "latency-lean")
    await create(client, url)
    bodies = [message("a", i, sizes.append_bytes) for i in range(sizes.append_count)]
    with Timed() as timed:
        seconds = lean_appends(url, bodies)  # blocks the event loop: nothing else runs now
    await expect_stream(client, url, b"".join(bodies), "append latency stream (http.client)")
    label = f"append latency, {sizes.append_bytes} B, sequential ({sizes.append_count})"
    return latency_figures("append lean", f"{label}, stdlib http.client", seconds, timed)


def lean_appends(url: str, bodies: list[bytes]) -> list[float]:
    """Each body appended over one kept-alive http.client connection; the time of each."""
    parts = httpx.URL(url)
    connection = http.client.HTTPConnection(parts.host, parts.port, timeout=60)
    headers = {"Content-Type": OCTETS}
    seconds = []
    try:
        for body in bodies:
            started = time.perf_counter()
            # A bytes body goes out in one send with the headers (no Nagle/delayed-ACK stall).
            connection.request("POST", parts.raw_path.decode(), body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            seconds.append(time.perf_counter() - started)
            if response.status not in (200, 204):
                raise Failed(f"POST {parts.path}: {response.status} {answer[:200]!r}")
    finally:
        connection.close()
    return seconds


async def write_sequentially(
    client: httpx.AsyncClient, url: str, tag: str, count: int, size: int
) -> None:
    for i in range(count):
        await append(client, url, message(tag, i, size))


async def writers_at_once(
    clients: Clients, urls: list[str], tags: list[str], count: int, size: int
) -> Timed:
    """Writer i appends its `count` messages sequentially to `urls[i]`, on a client of its own,
    all writers at once; the time from the first to the last append's answer."""
    async with clients.several(len(tags)) as own:
        writes = [
            write_sequentially(own_client, url, tag, count, size)
            for own_client, url, tag in zip(own, urls, tags, strict=True)
        ]
        with Timed() as timed:
            await asyncio.gather(*writes)
    return timed


async def concurrent_appends(
    clients: Clients, base: str, sizes: Sizes, shared: bool
) -> list[Figure]:
    client = clients.main
    tags = [f"w{w:03d}-" for w in range(sizes.writers)]
    urls = [stream_url(base, "concurrent") for _ in (tags[:1] if shared else tags)]
    for url in urls:
        await create(client, url)
    writer_urls = urls * len(tags) if shared else urls
    count, size = sizes.appends_per_writer, sizes.append_bytes
    timed = await writers_at_once(clients, writer_urls, tags, count, size)
    if shared:
        got, _ = await read_all(client, urls[0])
        check_interleaved("shared stream", got, tags, count, size)
    else:
        for url, tag in zip(urls, tags, strict=True):
            await expect_stream(client, url, messages(tag, count, size), f"writer {tag}")
    where = "one shared stream" if shared else "a stream each"
    key = "concurrent shared" if shared else "concurrent separate"
    label = f"concurrent appends, {sizes.writers} writers x {count}, {where}"
    rate = len(tags) * count / timed.seconds
    return [Figure(key, label, "appends/s", rate, False, timed.client_cpu)]


async def many_in_flight(clients: Clients, base: str, sizes: Sizes) -> list[Figure]:
    """`sizes.in_flight` writers at once, over `sizes.in_flight_streams` streams (so several
    writers share each stream), each appending sequentially."""
    client = clients.main
    writers, streams = sizes.in_flight, sizes.in_flight_streams
    urls = [stream_url(base, "in-flight") for _ in range(streams)]
    for url in urls:
        await create(client, url)
    tags = [f"f{w:03d}-" for w in range(writers)]
    writer_urls = [urls[w % streams] for w in range(writers)]
    count, size = sizes.appends_per_writer, sizes.append_bytes
    timed = await writers_at_once(clients, writer_urls, tags, count, size)
    for index, url in enumerate(urls):
        got, _ = await read_all(client, url)
        check_interleaved(f"in-flight stream {index}", got, tags[index::streams], count, size)
    label = f"appends, {writers} in flight over {streams} streams, {count} each"
    rate = writers * count / timed.seconds
    return [Figure("in flight", label, "appends/s", rate, False, timed.client_cpu)]


async def producer_throughput(
    clients: Clients, base: str, sizes: Sizes, batched: bool, pipelined: bool = False
) -> list[Figure]:
    client = clients.main
    url = stream_url(base, "producer")
    await create(client, url)
    count = sizes.producer_messages if batched else sizes.unbatched_messages
    # A batch is cut as soon as it holds max_batch_bytes: 1 sends every message on its own.
    # One request at a time measures the server's producer path. Pipelined (several requests
    # in flight, over several connections), requests may overtake each other on the way: a
    # server that applies them as they arrive answers 409 (sequence gap) to the early ones,
    # which the client resends (counted under the table).
    unbatched = ProducerSettings(max_batch_bytes=1, max_in_flight=5 if pipelined else 1)
    settings = ProducerSettings() if batched else unbatched
    stream = AsyncDurableStream(url, client=client)
    await stream.head()  # the producer's content-type lookup, outside the timing
    producer = IdempotentProducer(stream, "http-compare", settings=settings)
    with Timed() as timed:
        for i in range(count):
            await producer.append(message("p", i, sizes.append_bytes))
        await producer.flush()
    await producer.detach()
    await expect_stream(client, url, messages("p", count, sizes.append_bytes), "producer stream")
    in_flight = "5 in flight (pipelined)" if pipelined else "1 in flight"
    how = "client defaults (batched)" if batched else f"1 message per request, {in_flight}"
    key = "producer batched" if batched else "producer unbatched"
    key += " pipelined" if pipelined else ""
    label = f"idempotent producer, {sizes.append_bytes} B x {count}, {how}"
    return [Figure(key, label, "messages/s", count / timed.seconds, False, timed.client_cpu)]


async def live_latency(clients: Clients, base: str, sizes: Sizes) -> list[Figure]:
    client = clients.main
    url = stream_url(base, "live")
    tail = await create(client, url)
    count, size = sizes.live_appends, sizes.append_bytes
    deliveries: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    def received(when: float, body: bytes) -> None:
        deliveries.put_nowait((when, body))

    async with clients.several(1) as (own,):
        reader = asyncio.create_task(follow_live(own, url, tail, count * size, received))
        try:
            with Timed() as timed:
                seconds = [
                    await append_and_await_delivery(
                        client, url, message("l", i, size), sizes.live_gap, deliveries, reader
                    )
                    for i in range(count)
                ]
            await asyncio.wait_for(reader, 10)
        finally:
            reader.cancel()
    await expect_stream(client, url, messages("l", count, size), "live stream")
    label = f"live delivery, 1 long-poll reader, {size} B ({count})"
    return latency_figures("live", label, seconds, timed)


async def append_and_await_delivery(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    gap: float,
    deliveries: asyncio.Queue[tuple[float, bytes]],
    reader: asyncio.Task[None],
) -> float:
    """After `gap` (the reader's next long-poll is waiting by then), append `body`; the
    seconds from just before sending it to the reader having it."""
    await asyncio.sleep(gap)
    sent = time.perf_counter()
    await append(client, url, body)
    when, got = await next_delivery(deliveries, reader)
    check_bytes("long-poll delivery", got, body)
    return when - sent


async def next_delivery(
    deliveries: asyncio.Queue[tuple[float, bytes]], reader: asyncio.Task[None]
) -> tuple[float, bytes]:
    """The reader's next delivery; or the reader's own failure, rather than a silent wait."""
    getting = asyncio.ensure_future(deliveries.get())
    await asyncio.wait({getting, reader}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if getting.done():
        return getting.result()
    getting.cancel()
    if reader.done():
        reader.result()  # raises what stopped it
    raise Failed("long-poll reader: nothing delivered within 60 s of an append")


async def catch_up(
    clients: Clients, base: str, sizes: Sizes, notes: list[str], small: bool = False
) -> list[Figure]:
    """Catch-up reads of a stream just written and, `history_after` seconds later, of the same
    history; written in `catch_up_append_bytes` appends, or (`small`) `small_append_bytes`."""
    client = clients.main
    prefix = "small " if small else ""
    url = stream_url(base, f"{prefix}catch-up".replace(" ", "-"))
    await create(client, url)
    size = sizes.small_append_bytes if small else sizes.catch_up_append_bytes
    count = max(1, sizes.catch_up_bytes // size)
    with Timed() as writing:
        await write_sequentially(client, url, "c", count, size)
    want = messages("c", count, size)
    reads = sizes.catch_up_reads
    rate, responses, reading = await median_read_rate(client, url, want, reads, "catch-up read")
    notes.append(
        f"a catch-up read of {len(want):,} bytes in {size:,} B appends took {responses} response(s)"
    )
    stored = f"{len(want) / KIB / KIB:.1f} MiB in {size // KIB} KiB appends"
    figures = [
        Figure(f"{prefix}bulk append", f"bulk append, {stored}, sequential", "MB/s",
               len(want) / writing.seconds / MB, False, writing.client_cpu),
        Figure(f"{prefix}catch-up", f"catch-up read of {stored}, just written, median of {reads}",
               "MB/s", rate, False, reading.client_cpu),
    ]  # fmt: skip
    if sizes.history_after > 0:
        await asyncio.sleep(sizes.history_after)
        rate, _, rereading = await median_read_rate(client, url, want, reads, "history read")
        label = f"catch-up read of the same{' (' + stored + ')' if small else ''}, "
        label += f"{sizes.history_after:.0f} s later, median of "
        figures.append(
            Figure(f"{prefix}catch-up history", f"{label}{reads}", "MB/s", rate, False,
                   rereading.client_cpu)
        )  # fmt: skip
    return figures


async def median_read_rate(
    client: httpx.AsyncClient, url: str, want: bytes, reads: int, what: str
) -> tuple[float, int, Timed]:
    """`reads` catch-up reads of the whole stream, each checked against `want`: their median
    MB/s, the responses the last one took, and the time of them all."""
    rates, responses = [], 0
    with Timed() as timed:
        for _ in range(reads):
            started = time.perf_counter()
            got, responses = await read_all(client, url)
            rates.append(len(got) / (time.perf_counter() - started) / MB)
            check_bytes(what, got, want)
    return statistics.median(rates), responses, timed


async def spread_appends(clients: Clients, base: str, sizes: Sizes) -> list[Figure]:
    """Scenario 7: sequential appends over time, the server's background work among them."""
    client = clients.main
    url = stream_url(base, "spread")
    await create(client, url)
    size = sizes.small_append_bytes
    with Timed() as timed:
        times = await append_spikes.sequential_appends(
            client, url, size, sizes.spread_seconds, sizes.spread_burst, sizes.spread_pause
        )
    want = b"".join(append_spikes.message(i, size) for i in range(len(times)))
    await expect_stream(client, url, want, "appends over time")
    how = f"bursts of {sizes.spread_burst:g} s, {sizes.spread_pause:g} s apart"
    label = f"append latency, {size // KIB} KiB, sequential over {sizes.spread_seconds:g} s ({how})"
    seconds = [end - start for start, end in times]
    return latency_figures("spread", label, seconds, timed, with_max=True)


class FanOutReader:
    """One reader of the fan-out: cuts what arrives into messages and notes when each came."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data = bytearray()
        self.arrivals: list[float] = []  # arrivals[i]: when message i was complete here

    def received(self, when: float, body: bytes) -> None:
        self.data += body
        complete = len(self.data) // self.size
        self.arrivals += [when] * (complete - len(self.arrivals))


async def fan_out(clients: Clients, base: str, sizes: Sizes) -> list[Figure]:
    client = clients.main
    url = stream_url(base, "fan-out")
    tail = await create(client, url)
    count, size = sizes.fan_out_appends, sizes.append_bytes
    readers = [FanOutReader(size) for _ in range(sizes.readers)]
    ready = asyncio.Semaphore(0)

    async def read(own: httpx.AsyncClient, reader: FanOutReader) -> None:
        # A first catch-up GET opens this reader's connection, so every long-poll is waiting
        # before the first append instead of connecting after it.
        expect_status(await own.get(url, params=read_params(tail, False, None)), 200)
        ready.release()
        await follow_live(own, url, tail, count * size, reader.received)

    async with clients.several(len(readers)) as own:
        tasks = [asyncio.create_task(read(c, r)) for c, r in zip(own, readers, strict=True)]
        try:
            for _ in readers:
                await asyncio.wait_for(ready.acquire(), 60)
            await asyncio.sleep(0.5)  # for the long-polls themselves to reach the server
            with Timed() as timed:
                sent = await append_on_schedule(client, url, count, size, sizes.fan_out_spacing)
                await all_delivered(tasks, readers, count)
        finally:
            for task in tasks:
                task.cancel()
    want = messages("f", count, size)
    for number, reader in enumerate(readers):
        check_bytes(f"fan-out reader {number}", bytes(reader.data), want)
    seconds = [r.arrivals[i] - sent[i] for r in readers for i in range(count)]
    spacing = f"{sizes.fan_out_spacing * 1000:.0f} ms apart"
    label = f"fan-out, {sizes.readers} long-poll readers, {count} appends {spacing}"
    return latency_figures("fan-out", label, seconds, timed)


async def all_delivered(
    tasks: list[asyncio.Task[None]], readers: list[FanOutReader], count: int
) -> None:
    """Every reader's task has ended (having all `count` messages), or a reader's failure."""
    try:
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    except TimeoutError:
        short = [len(r.arrivals) for r in readers if len(r.arrivals) < count]
        raise Failed(f"fan-out: {len(short)} reader(s) short of {count}: {short[:5]}") from None


async def append_on_schedule(
    client: httpx.AsyncClient, url: str, count: int, size: int, spacing: float
) -> list[float]:
    """Append message i at `spacing` * i from now (later if the previous append is still
    running); returns when each was sent."""
    sent = []
    start = time.perf_counter()
    for i in range(count):
        await asyncio.sleep(max(0.0, start + i * spacing - time.perf_counter()))
        sent.append(time.perf_counter())
        await append(client, url, message("f", i, size))
    return sent


async def warm_up(clients: Clients, base: str) -> list[Figure]:
    """Every request kind the scenarios make, a few times, on streams of their own; its
    figures are dropped."""
    await append_latency(clients, base, WARM_UP)
    await append_latency_lean(clients, base, WARM_UP)
    await concurrent_appends(clients, base, WARM_UP, shared=True)
    await producer_throughput(clients, base, WARM_UP, batched=True)
    await producer_throughput(clients, base, WARM_UP, batched=False)
    await live_latency(clients, base, WARM_UP)
    await catch_up(clients, base, WARM_UP, [])
    await fan_out(clients, base, WARM_UP)
    return []


# ---------------------------------------------------------------- running


class Clients:
    """The httpx clients of one server's run: `main` for whatever runs alone, and one client
    per concurrent reader or writer (`several`), as separate programs would have. One client
    shared by many connections costs CPU per request that grows with the connections: 50
    long-poll readers on one client took about 0.5 s per delivery, against 0.04 s on a client
    each, so the figures were the pool's, not the server's."""

    def __init__(self) -> None:
        # Every answer of 400 or above: some are expected and handled (a producer's resent
        # sequence gap, say); they are reported under the table, not failed.
        self.refusals: Counter[str] = Counter()
        self.main = self.new()

    def new(self) -> httpx.AsyncClient:
        async def count_refusals(response: httpx.Response) -> None:
            if response.status_code >= 400:
                self.refusals[f"{response.request.method} {response.status_code}"] += 1

        return httpx.AsyncClient(
            timeout=httpx.Timeout(60.0),
            headers={"Accept-Encoding": "identity"},
            event_hooks={"response": [count_refusals]},
        )

    @contextlib.asynccontextmanager
    async def several(self, count: int) -> AsyncIterator[list[httpx.AsyncClient]]:
        group = [self.new() for _ in range(count)]
        try:
            yield group
        finally:
            await asyncio.gather(*(c.aclose() for c in group))


async def run_scenarios(base: str, sizes: Sizes, run: ServerRun) -> None:
    clients = Clients()
    async with clients.main:
        steps: list[tuple[str, Callable[[], Awaitable[list[Figure]]]]] = [
            ("warm-up", lambda: warm_up(clients, base)),
            ("append latency", lambda: append_latency(clients, base, sizes)),
            ("append latency, http.client", lambda: append_latency_lean(clients, base, sizes)),
            ("concurrent, shared", lambda: concurrent_appends(clients, base, sizes, True)),
            ("concurrent, separate", lambda: concurrent_appends(clients, base, sizes, False)),
            ("producer, batched", lambda: producer_throughput(clients, base, sizes, True)),
            ("producer, unbatched", lambda: producer_throughput(clients, base, sizes, False)),
            ("in flight", lambda: many_in_flight(clients, base, sizes)),
            (
                "producer, pipelined",
                lambda: producer_throughput(clients, base, sizes, False, pipelined=True),
            ),
            ("live delivery", lambda: live_latency(clients, base, sizes)),
            ("catch-up", lambda: catch_up(clients, base, sizes, run.notes)),
            ("catch-up, small appends", lambda: catch_up(clients, base, sizes, run.notes, True)),
            ("appends over time", lambda: spread_appends(clients, base, sizes)),
            ("fan-out", lambda: fan_out(clients, base, sizes)),
        ]
        for name, step in steps:
            print(f"{run.name}: {name}", file=sys.stderr, flush=True)
            refusals = clients.refusals
            refusals.clear()
            try:
                run.add(await step())
            except (Failed, httpx.HTTPError, DurableStreamError, TimeoutError) as exc:
                run.problems.append(f"{name}: {type(exc).__name__}: {exc}")
            if refusals:
                answers = ", ".join(f"{n} x {answer}" for answer, n in sorted(refusals.items()))
                run.notes.append(f"{name}: the server answered {answers}")


@contextlib.contextmanager
def our_server(in_memory: bool) -> Iterator[tuple[str, str]]:
    """`dsaws serve` on the embedded emulator: by default as the README starts it (its data
    journaled to disk, in a fresh data directory of its own, which `dsaws_serve` provides, so
    that no earlier run's streams are replayed and no other server holds the directory)."""
    if in_memory:
        with dsaws_serve("--in-memory") as base:
            yield base, "dsaws serve --in-memory (embedded emulator)"
    else:
        with dsaws_serve() as base:
            yield base, "dsaws serve (embedded emulator, journaled to a fresh --data-dir)"


SERVERS = ("reference", "ours")


def measure(name: str, sizes: Sizes, in_memory: bool) -> ServerRun:
    server = reference_server() if name == "reference" else our_server(in_memory)
    with server as (base, description):
        run = ServerRun(name, description)
        # This client's own full collections (of httpx, asyncio and the modules: some 50 to
        # 80 ms each) would pause the measurement of either server; what exists now is frozen.
        gc.collect()
        gc.freeze()
        try:
            asyncio.run(run_scenarios(base, sizes, run))
        finally:
            gc.unfreeze()
    return run


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Target:
    key: str
    text: str
    met: Callable[[float, float | None], bool | None]  # (ours, reference) -> met, or unknown


# Beyond being within 3x of the reference (every row), these rows have a target of their own.
TARGETS = [
    Target("catch-up", "ours >= 50 MB/s", lambda ours, _: ours >= 50),
    Target("catch-up history", "ours >= 50 MB/s", lambda ours, _: ours >= 50),
    Target("small catch-up", "ours >= 50 MB/s", lambda ours, _: ours >= 50),
    Target("small catch-up history", "ours >= 50 MB/s", lambda ours, _: ours >= 50),
    Target("fan-out p50", "ours <= 200 ms", lambda ours, _: ours <= 200),
]
# The tail of a latency row, against its own median: no spikes.
SPIKE_FREE = {
    "append p99": "append p50",
    "append lean p99": "append lean p50",
    "spread p99": "spread p50",
}
# Rows that cannot be within 3x of the reference on this stack, and where the README says why.
EXPLAINED = {
    "append lean p50": "benchmarks/README.md#rows-not-within-3x",
    "spread p99": "benchmarks/README.md#rows-not-within-3x",
}


def ratio(figure: Figure, ours: float, reference: float) -> float:
    """Above 1: ours is worse by that factor, whichever way the row is better."""
    if figure.lower_is_better:
        return ours / reference if reference else math.inf
    return reference / ours if ours else math.inf


def verdict(met: bool | None) -> str:
    return "n/a" if met is None else "met" if met else "NOT MET"


def target_cell(key: str, figures: dict[str, Figure], reference: Figure | None) -> str:
    """Every target of a row and whether our figure meets it."""
    ours = figures.get(key)
    if ours is None:
        return "not measured"
    cells = []
    if reference is not None:
        within = ratio(ours, ours.value, reference.value) <= 3
        note = f" (why: {EXPLAINED[key]})" if key in EXPLAINED and not within else ""
        cells.append(f"within 3x: {verdict(within)}{note}")
    if key in SPIKE_FREE and SPIKE_FREE[key] in figures:
        median = figures[SPIKE_FREE[key]].value
        cells.append(f"p99 <= 3x our p50: {verdict(ours.value <= 3 * median)}")
    for target in TARGETS:
        if target.key == key:
            met = target.met(ours.value, reference.value if reference else None)
            cells.append(f"{target.text}: {verdict(met)}")
    return "; ".join(cells)


def cpu_share(figure: Figure | None) -> str:
    return "-" if figure is None else f"{figure.client_cpu:.0%}"


def number(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


COLUMNS = (
    "scenario",
    "unit",
    "better",
    "reference",
    "ours",
    "ratio (>1: ours worse)",
    "target",
    "client CPU (reference / ours)",
)


def print_report(runs: dict[str, ServerRun]) -> None:
    for run in runs.values():
        print(f"{run.name}: {run.description}")
    print("client: httpx (async), one Python process, a client per concurrent reader or writer")
    print("both servers on loopback, one at a time\n")
    print_table(COLUMNS, "<<<>>><>", comparison_rows(runs))
    print()
    for run in runs.values():
        for note in run.notes:
            print(f"{run.name}: {note}")
        for problem in run.problems:
            print(f"WRONG: {run.name}: {problem}")


def comparison_rows(runs: dict[str, ServerRun]) -> Iterator[list[str]]:
    """A row per figure either server measured, in the order they were measured."""
    reference, ours = runs.get("reference"), runs.get("ours")
    keys = list(dict.fromkeys(k for run in runs.values() for k in run.figures))
    for key in keys:
        theirs = reference.figures.get(key) if reference else None
        mine = ours.figures.get(key) if ours else None
        shown = mine or theirs
        assert shown is not None
        ratio_cell = "-"
        if mine is not None and theirs is not None:
            ratio_cell = f"{ratio(shown, mine.value, theirs.value):.2f}"
        yield [
            shown.label,
            shown.unit,
            "lower" if shown.lower_is_better else "higher",
            number(theirs.value) if theirs else "-",
            number(mine.value) if mine else "-",
            ratio_cell,
            target_cell(key, ours.figures, theirs) if ours else "not measured",
            f"{cpu_share(theirs)} / {cpu_share(mine)}",
        ]


# ---------------------------------------------------------------- command line


def parse_sizes(args: argparse.Namespace) -> Sizes:
    base = QUICK if args.quick else Sizes()
    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Sizes)
        if getattr(args, f.name, None) is not None
    }
    return dataclasses.replace(base, **given)


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--only", choices=SERVERS, help="measure one server only")
    parser.add_argument(
        "--in-memory",
        action="store_true",
        help="start ours with --in-memory (no journal on disk), as the reference keeps its data",
    )
    defaults = Sizes()
    for f in dataclasses.fields(Sizes):
        kind = float if isinstance(getattr(defaults, f.name), float) else int
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=kind,
            dest=f.name,
            help=f"default {getattr(defaults, f.name)} ({getattr(QUICK, f.name)} with --quick)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    sizes = parse_sizes(args)
    names = [args.only] if args.only else ["reference", "ours"]
    runs = {name: measure(name, sizes, args.in_memory) for name in names}
    print_report(runs)
    return 1 if any(run.problems for run in runs.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
