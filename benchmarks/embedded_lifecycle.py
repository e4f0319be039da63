"""The embedded default over an afternoon of use: streams written and deleted in rounds.

Each round starts `dsaws serve` on the same data directory (timing its start-up: from the
command to its first answer), writes `--round-mb` into fresh streams in 64 KiB appends,
deletes the previous round's streams (so `--round-mb` stay live), waits until the server's
background collector has removed them and its journal has settled, reads a fresh 5 MB stream
from the start (catch-up MB/s), and stops the server. Printed per round: the journal's size,
the server's memory (resident set), its start-up time and the catch-up rate; the figures should
stay flat across rounds, following the live data rather than everything ever written.

The collector waits `--grace` seconds (DS_COLLECT_GRACE_SECONDS; a deployment's default is an
hour) so that an afternoon fits in minutes.

    python -m benchmarks.embedded_lifecycle [--rounds 10] [--round-mb 50] [--grace 3]

With `--startup MB`, it measures start-up alone instead: MB of live streams written in
`--append-kib` appends (20 streams), the server stopped, and started again three times.

    python -m benchmarks.embedded_lifecycle --startup 100 [--append-kib 64]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._processes import DSAWS_SERVE, ChildProcess, answers, free_port, python_module
from benchmarks._reads import read_from_start
from benchmarks._report import print_table

MB = 1_000_000
APPEND_BYTES = 64 * 1024
STREAM_MB = 5


@dataclass
class Round:
    number: int
    written_mb: float
    startup_seconds: float
    journal_mb: float
    memory_mb: float
    catch_up_mb_s: float


class Server:
    """`dsaws serve` on `data_dir`, in a process of its own, started by the constructor;
    `startup` is how long it took to answer."""

    def __init__(self, data_dir: Path, grace: float, interval: float) -> None:
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        env = {"DS_COLLECT_GRACE_SECONDS": str(grace), "DS_COLLECT_INTERVAL": str(interval)}
        command = python_module(DSAWS_SERVE, port, "--data-dir", str(data_dir))
        self.child = ChildProcess(command, env)
        started = time.perf_counter()
        # Polled often: the start-up time is a figure of the table. A large journal takes its
        # time to replay, hence the long wait.
        self.child.start(answers(f"{self.base}/healthz"), within=600, poll=0.02)
        self.startup = time.perf_counter() - started

    def url(self, name: str) -> str:
        return f"{self.base}/v1/stream/{name}"

    def memory_mb(self) -> float:
        assert self.child.popen is not None
        status = Path(f"/proc/{self.child.popen.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024 / MB

    def stop(self) -> None:
        self.child.stop(grace=30)  # it closes its journal first


def write_stream(
    client: httpx.Client, url: str, megabytes: float, seed: int, append: int = APPEND_BYTES
) -> None:
    client.put(url).raise_for_status()
    part = bytes([seed % 251]) * append
    for _ in range(int(megabytes * MB) // append):
        client.post(url, content=part).raise_for_status()


def catch_up_rate(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    data, _ = read_from_start(client, url)
    return len(data) / MB / (time.perf_counter() - started)


def settled_journal(path: Path, quiet_for: float, longest: float) -> float:
    """The journal's size once it has not changed for `quiet_for` seconds (the collector and
    the compaction it may start are done), or after `longest`."""
    deadline = time.monotonic() + longest
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = path.stat().st_size if path.exists() else 0
        if size != last:
            last, since = size, time.monotonic()
        elif time.monotonic() - since >= quiet_for:
            break
        time.sleep(0.2)
    return last / MB


def run(rounds: int, round_mb: float, grace: float, interval: float, data_dir: Path) -> None:
    print(
        f"{rounds} rounds of {round_mb:g} MB written in {APPEND_BYTES // 1024} KiB appends, the "
        f"previous round's streams deleted; collector grace {grace:g} s, every {interval:g} s"
    )
    print_table(COLUMNS, ">>>>>>>", rounds_of(rounds, round_mb, grace, interval, data_dir), True)


COLUMNS = (
    "round",
    "written (MB, all rounds)",
    "live (MB)",
    "journal (MB)",
    "server memory (MB)",
    "start-up (s)",
    f"catch-up of a fresh {STREAM_MB} MB stream (MB/s)",
)


def rounds_of(
    rounds: int, round_mb: float, grace: float, interval: float, data_dir: Path
) -> Iterator[list[str]]:
    """Each round's table row, as soon as the round is done."""
    written = 0.0
    streams_per_round = max(1, int(round_mb // STREAM_MB))
    headers = {"Content-Type": "application/octet-stream"}
    for number in range(1, rounds + 1):
        server = Server(data_dir, grace, interval)
        try:
            with httpx.Client(timeout=60, headers=headers) as client:
                for index in range(streams_per_round):
                    write_stream(client, server.url(f"r{number}/{index}"), STREAM_MB, index)
                    written += STREAM_MB
                if number > 1:
                    for index in range(streams_per_round):
                        client.delete(server.url(f"r{number - 1}/{index}")).raise_for_status()
                time.sleep(grace + interval)
                journal = settled_journal(data_dir / "journal.bin", 3 * interval, 120)
                fresh = server.url(f"fresh/{number}")
                write_stream(client, fresh, STREAM_MB, number)
                rate = catch_up_rate(client, fresh)
                client.delete(fresh).raise_for_status()
                memory = server.memory_mb()
        finally:
            server.stop()
        row = Round(number, written, server.startup, journal, memory, rate)
        live = streams_per_round * STREAM_MB
        yield [
            str(row.number),
            f"{row.written_mb:,.0f}",
            str(live),
            f"{row.journal_mb:,.1f}",
            f"{row.memory_mb:,.0f}",
            f"{row.startup_seconds:.2f}",
            f"{row.catch_up_mb_s:.1f}",
        ]


def startup(megabytes: float, append_kib: int, data_dir: Path) -> None:
    """Start-up times of a server holding `megabytes` of live streams."""
    streams = 20
    headers = {"Content-Type": "application/octet-stream"}
    server = Server(data_dir, 3600, 60)
    try:
        with httpx.Client(timeout=60, headers=headers) as client:
            for index in range(streams):
                url = server.url(f"live/{index}")
                write_stream(client, url, megabytes / streams, index, append_kib * 1024)
        time.sleep(15)  # the sealer's sweeps
    finally:
        server.stop()
    journal = (data_dir / "journal.bin").stat().st_size / MB
    print(
        f"{megabytes:g} MB live in {append_kib} KiB appends ({streams} streams), journal "
        f"{journal:,.1f} MB"
    )
    for attempt in range(3):
        server = Server(data_dir, 3600, 60)
        memory = server.memory_mb()
        server.stop()
        print(f"start-up {attempt + 1}: {server.startup:.2f} s, server memory {memory:,.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--round-mb", type=float, default=50)
    parser.add_argument("--grace", type=float, default=3.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--data-dir", type=Path, help="default: a fresh temporary directory")
    parser.add_argument("--startup", type=float, help="measure start-up with this many MB live")
    parser.add_argument("--append-kib", type=int, default=64)
    args = parser.parse_args()
    if args.startup is not None:
        with tempfile.TemporaryDirectory(prefix="dsaws-startup-") as directory:
            startup(args.startup, args.append_kib, Path(directory))
        return
    if args.data_dir is not None:
        run(args.rounds, args.round_mb, args.grace, args.interval, args.data_dir)
        return
    with tempfile.TemporaryDirectory(prefix="dsaws-lifecycle-") as directory:
        run(args.rounds, args.round_mb, args.grace, args.interval, Path(directory))


if __name__ == "__main__":
    main()
