"""Latency spikes of sequential appends to `dsaws serve`, and what caused each one.

One client appends to one stream, each append awaited before the next, for `--seconds` per
body size (100 B, then 1 KiB), in bursts of `--burst` seconds separated by `--pause` seconds of
silence: a writer that stops now and then, as people and programs do (and the background
sealer and collector of `dsaws serve` on the embedded emulator start a sweep once the server
has been quiet for a second, or after 30 s of waiting). Before measuring, another stream is
given `--preload-mb` of data in 64 KiB appends, so the emulator holds data and the sealer has
history to move. The server runs as the README starts it (embedded emulator, journaled to a
fresh data directory), with `DS_COLLECT_INTERVAL=--collect-interval` so the collector runs
within the measurement too.

The server records what can make a request wait (`DS_PAUSE_TRACE`, see
`core/pause_trace.py`): its garbage collections, every turn at the emulator's lock (and the
journal writes inside them), the sweeps of the sealer and the collector, and each request. The
client's timings and the server's share one clock (`time.monotonic()` is the machine's on
Linux), so each slow append (over 3x the median of its size) is attributed to the first of
these that it overlapped:

1. `gc generation N`: collections of Python's garbage collector (they stop every thread)
   that overlapped the append for at least half the time it took over the median;
2. `journal compaction`: steps of compacting the emulator's journal, under its lock, likewise;
3. `sealer` / `collector`: a sweep was running (its turns at the lock, its CPU);
4. `journal write`: the append's own journal write took over 1 ms;
5. `outside the server`: the server answered within twice the median; the rest of the time
   went to the client or the machine (other processes on its two cores);
6. `server, descheduled`: the server took over twice the median, but its thread ran for less
   than half of that (with no other thread of the server busy: the machine ran another
   process); `server, other`: the rest.

Printed: p50/p99/max per size with the target (p99 within 3x p50), then the causes: slow
appends, their share, and the time they added over the median. Every stream is read back and
checked (exit status 1 otherwise); timings never fail the run. A server without the trace
(an older version) is measured all the same, its spikes unattributed.

    python -m benchmarks.append_spikes [--quick] [--seconds 20] [--burst 6] [--pause 1.5]
                                       [--preload-mb 20] [--collect-interval 10]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks._processes import dsaws_serve
from benchmarks._report import print_table
from benchmarks._stats import percentile

OCTETS = {"Content-Type": "application/octet-stream"}
KIB = 1024
SIZES = (100, KIB)
SLOW = 3.0  # an append slower than this many medians is a spike
TARGET = 3.0  # p99 within this many medians


@dataclass(frozen=True)
class Appends:
    """The client's view of one size's run: (start, end) of each append, `time.monotonic()`."""

    size: int
    times: list[tuple[float, float]]

    @property
    def seconds(self) -> list[float]:
        return [end - start for start, end in self.times]


class Failed(Exception):
    """A stream read back is not what was appended, or the server answered unexpectedly."""


# ---------------------------------------------------------------- the client


def message(i: int, size: int) -> bytes:
    head = f"{i:08d}:".encode()
    return head + b"x" * (size - len(head))


async def create(client: httpx.AsyncClient, url: str) -> None:
    response = await client.put(url, headers=OCTETS)
    if response.status_code != 201:
        raise Failed(f"PUT {url}: {response.status_code}")


async def append(client: httpx.AsyncClient, url: str, body: bytes) -> None:
    response = await client.post(url, content=body, headers=OCTETS)
    if response.status_code not in (200, 204):
        raise Failed(f"POST {url}: {response.status_code} {response.text[:200]!r}")


async def read_all(client: httpx.AsyncClient, url: str) -> bytes:
    pieces, offset = [], "-1"
    while True:
        response = await client.get(url, params={"offset": offset})
        if response.status_code != 200:
            raise Failed(f"GET {url}: {response.status_code}")
        pieces.append(response.content)
        if response.headers.get("Stream-Up-To-Date") == "true":
            return b"".join(pieces)
        offset = response.headers["Stream-Next-Offset"]


async def preload(client: httpx.AsyncClient, base: str, megabytes: float) -> None:
    url = f"{base}/append-spikes-preload"
    await create(client, url)
    body = b"p" * (64 * KIB)
    for _ in range(int(megabytes * 16)):
        await append(client, url, body)


async def sequential_appends(
    client: httpx.AsyncClient, url: str, size: int, seconds: float, burst: float, pause: float
) -> list[tuple[float, float]]:
    """Append to `url` one at a time for `seconds` of appending, in bursts of `burst` seconds
    with `pause` seconds of silence between them (not counted); each append's (start, end)."""
    times: list[tuple[float, float]] = []
    appending = 0.0
    while appending < seconds:
        burst_end = time.monotonic() + min(burst, seconds - appending)
        burst_start = time.monotonic()
        while (started := time.monotonic()) < burst_end:
            await append(client, url, message(len(times), size))
            times.append((started, time.monotonic()))
        appending += time.monotonic() - burst_start
        if appending < seconds:
            await asyncio.sleep(pause)
    return times


async def measure(base: str, args: argparse.Namespace) -> list[Appends]:
    runs = []
    async with httpx.AsyncClient(timeout=60, headers={"Accept-Encoding": "identity"}) as client:
        await preload(client, base, args.preload_mb)
        # The client's own full collections would be counted as the server's spikes.
        gc.collect()
        gc.freeze()
        for size in SIZES:
            url = f"{base}/append-spikes-{size}"
            await create(client, url)
            times = await sequential_appends(
                client, url, size, args.seconds, args.burst, args.pause
            )
            got = await read_all(client, url)
            want = b"".join(message(i, size) for i in range(len(times)))
            if got != want:
                raise Failed(f"{url}: {len(got)} bytes read back, {len(want)} appended")
            runs.append(Appends(size, times))
        gc.unfreeze()
    return runs


# ---------------------------------------------------------------- attribution


class Trace:
    """The server's trace, indexed for looking up what overlapped an interval."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.collections = [e for e in events if e["kind"] == "gc"]
        locks = [e for e in events if e["kind"] == "lock"]
        self.compactions = [e for e in locks if e["action"].startswith("compaction")]
        self.sweeps = [e for e in events if e["kind"] == "sweep"]
        self.requests = sorted(
            (e for e in events if e["kind"] == "request" and e["method"] == "POST"),
            key=lambda e: e["start"],
        )
        self._request_starts = [e["start"] for e in self.requests]
        self.turns = sorted((e for e in locks if e["thread"] == "MainThread"),
                            key=lambda e: e["requested"])  # fmt: skip
        self._turn_starts = [e["requested"] for e in self.turns]

    def request(self, start: float, end: float) -> dict[str, Any] | None:
        """The server's record of the request the client sent between `start` and `end`."""
        i = bisect.bisect_left(self._request_starts, start)
        if i < len(self.requests) and self.requests[i]["start"] < end:
            return self.requests[i]
        return None

    def journal_seconds(self, start: float, end: float) -> float:
        i = bisect.bisect_left(self._turn_starts, start)
        seconds = 0.0
        while i < len(self.turns) and self.turns[i]["requested"] < end:
            seconds += self.turns[i]["journal_seconds"]
            i += 1
        return seconds

    def cause(self, start: float, end: float, median: float) -> str:
        """What made the append between `start` and `end` slow (see the module's doc)."""
        excess = end - start - median
        collections = [
            (e, overlap(start, end, e["start"], e["start"] + e["seconds"]))
            for e in self.collections
        ]
        if sum(seconds for _, seconds in collections) >= excess / 2:
            return f"gc generation {max(e['generation'] for e, s in collections if s > 0)}"
        compacting = sum(
            overlap(start, end, e["acquired"], e["released"]) for e in self.compactions
        )
        if compacting >= excess / 2:
            return "journal compaction"
        for sweep in self.sweeps:
            if overlap(start, end, sweep["start"], sweep["end"]) > 0:
                return "sealer" if sweep["name"] == "sealing" else "collector"
        if self.journal_seconds(start, end) > 0.001:
            return "journal write"
        served = self.request(start, end)
        if served is None or served["end"] - served["start"] <= 2 * median:
            return "outside the server"
        if served.get("cpu", 0.0) < (served["end"] - served["start"]) / 2:
            return "server, descheduled"
        return "server, other"


def overlap(start: float, end: float, other_start: float, other_end: float) -> float:
    return max(0.0, min(end, other_end) - max(start, other_start))


def read_trace(path: Path) -> Trace | None:
    """The trace the server wrote (JSON lines, `core/pause_trace.py`), read here rather than
    through the server's package: a server from before the trace writes none."""
    if not path.exists():
        return None
    return Trace([json.loads(line) for line in path.read_text().splitlines() if line])


def causes(run: Appends, trace: Trace | None) -> tuple[Counter[str], Counter[str]]:
    """Per cause: the slow appends, and the seconds they took over the median."""
    median = percentile(run.seconds, 0.5)
    slow: Counter[str] = Counter()
    excess: Counter[str] = Counter()
    for start, end in run.times:
        if end - start <= SLOW * median:
            continue
        cause = "(no trace)" if trace is None else trace.cause(start, end, median)
        slow[cause] += 1
        excess[cause] += end - start - median
    return slow, excess


# ---------------------------------------------------------------- report


def latency_rows(runs: Iterable[Appends]) -> list[list[str]]:
    rows = []
    for run in runs:
        seconds = run.seconds
        p50, p99 = percentile(seconds, 0.5), percentile(seconds, 0.99)
        met = "met" if p99 <= TARGET * p50 else "NOT MET"
        rows.append(
            [
                f"{run.size:,} B",
                f"{len(seconds):,}",
                f"{p50 * 1000:.2f}",
                f"{p99 * 1000:.2f}",
                f"{max(seconds) * 1000:.1f}",
                f"{p99 / p50:.1f}",
                f"p99 <= {TARGET:g}x p50: {met}",
            ]
        )
    return rows


def cause_rows(runs: Iterable[Appends], trace: Trace | None) -> list[list[str]]:
    rows = []
    for run in runs:
        slow, excess = causes(run, trace)
        for cause, count in slow.most_common():
            rows.append(
                [
                    f"{run.size:,} B",
                    cause,
                    f"{count:,}",
                    f"{count / len(run.times):.2%}",
                    f"{excess[cause] * 1000:,.0f}",
                ]
            )
    return rows


def sweep_lines(trace: Trace) -> list[str]:
    lines = []
    for sweep in trace.sweeps:
        waited = sweep["start"] - sweep["due"]
        took = sweep["end"] - sweep["start"]
        work = {k: v for k, v in sweep["report"].items() if v}
        lines.append(
            f"{sweep['name']}: waited {waited:.1f} s for a quiet server, ran {took:.2f} s "
            f"({sweep['thread_cpu']:.2f} s CPU) {work}"
        )
    return lines


def report(runs: list[Appends], trace: Trace | None, args: argparse.Namespace) -> None:
    how = f"over {args.seconds:g} s, bursts of {args.burst:g} s, {args.pause:g} s pauses"
    print(
        f"sequential appends to dsaws serve (embedded emulator, journaled), {how}, after "
        f"{args.preload_mb:g} MB preloaded; collector every {args.collect_interval:g} s\n"
    )
    columns = ("size", "appends", "p50 ms", "p99 ms", "max ms", "p99/p50", "target")
    print_table(columns, "<>>>>><", latency_rows(runs))
    print()
    if trace is None:
        print("the server wrote no trace (DS_PAUSE_TRACE): spikes are not attributed")
        return
    print(f"appends over {SLOW:g}x the median of their size, by what they overlapped:\n")
    columns = ("size", "cause", "slow appends", "of all", "ms over the median, total")
    print_table(columns, "<<>>>", cause_rows(runs, trace))
    print()
    for line in sweep_lines(trace):
        print(line)
    collections = Counter(e["generation"] for e in trace.collections)
    longest = {
        g: max(e["seconds"] for e in trace.collections if e["generation"] == g) for g in collections
    }
    print(
        "collections: "
        + ", ".join(
            f"generation {g}: {collections[g]} (longest {longest[g] * 1000:.1f} ms)"
            for g in sorted(collections)
        )
    )


# ---------------------------------------------------------------- command line


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds: a smoke test")
    parser.add_argument("--seconds", type=float, help="appending per size (default 20)")
    parser.add_argument("--burst", type=float, default=6.0, help="seconds of a burst")
    parser.add_argument("--pause", type=float, default=1.5, help="seconds between bursts")
    parser.add_argument("--preload-mb", type=float, help="MB in another stream first (20)")
    parser.add_argument("--collect-interval", type=float, default=10.0,
                        help="DS_COLLECT_INTERVAL of the server (10)")  # fmt: skip
    parser.add_argument("--keep", type=Path, help="save the client's timings and the server's "
                        "trace in this directory, for a closer look")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    if args.seconds is None:
        args.seconds = 2.0 if args.quick else 20.0
    if args.preload_mb is None:
        args.preload_mb = 1.0 if args.quick else 20.0
    with tempfile.TemporaryDirectory(prefix="append-spikes-") as work:
        trace_file = Path(work) / "trace.jsonl"
        env = {
            "DS_PAUSE_TRACE": str(trace_file),
            "DS_COLLECT_INTERVAL": f"{args.collect_interval:g}",
        }
        try:
            with dsaws_serve(env=env) as base:
                runs = asyncio.run(measure(base, args))
        except (Failed, httpx.HTTPError) as exc:
            print(f"WRONG: {type(exc).__name__}: {exc}")
            return 1
        report(runs, read_trace(trace_file), args)
        if args.keep is not None:
            keep(args.keep, runs, trace_file)
    return 0


def keep(directory: Path, runs: list[Appends], trace_file: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    timings = {str(run.size): run.times for run in runs}
    (directory / "appends.json").write_text(json.dumps(timings))
    if trace_file.exists():
        shutil.copyfile(trace_file, directory / "trace.jsonl")


if __name__ == "__main__":
    sys.exit(main())
