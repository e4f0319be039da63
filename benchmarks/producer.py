"""One idempotent producer into one stream through `dsaws serve`: ours and the upstream
TypeScript client's (npm @durable-streams/client), side by side against the same server.

Two servers, each in a process of its own (the producers run in this process and in Node):

- `dsaws serve`, as the README starts it (the embedded emulator inside the server's process);
- `dsaws serve --aws` against the emulator in a third process that counts the AWS calls it
  answers, for the AWS calls per message.

For 100 B and 4 KiB messages, each producer appends its messages to a fresh binary stream
(message i is `i:` padded with `x` to the size), waits for every acknowledgement (`flush`), and
the stream is read back and checked byte for byte: every message once, in order. Both producers
run with the TypeScript client's defaults (linger 5 ms, batches up to 1 MiB, 5 requests in
flight); times are measured inside each producer's process, from the first append to the end of
the flush. Each workload runs `--repeats` times on a fresh stream; the table shows the median
run. Exits non-zero if a stream does not hold exactly what was sent.

    python -m benchmarks.producer [--small 100000] [--large 5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

from benchmarks._processes import counted_emulator, dsaws_serve
from benchmarks._report import per_operation, print_table
from durable_streams_aws.client import AsyncDurableStream, DurableStream, IdempotentProducer
from interop import run_ts_client

SIZES = {"100 B": 100, "4 KiB": 4096}


def message(i: int, size: int) -> bytes:
    """Message i of a run (the same as `message` in interop/node/ts_client.mjs)."""
    head = f"{i}:".encode()
    return head + b"x" * max(0, size - len(head))


@dataclass
class Run:
    server: str
    size: str
    producer: str
    messages: int
    bytes: int
    seconds: float
    aws_calls: Counter[str] | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    @property
    def megabytes_per_second(self) -> float:
        return self.bytes / self.seconds / 1e6

    def aws_calls_per_thousand(self) -> str:
        if self.aws_calls is None:
            return "-"
        return f"{sum(self.aws_calls.values()) * 1000 / self.messages:.2f}"

    def aws_call_detail(self) -> str:
        if self.aws_calls is None:
            return "(not counted: emulator inside the server)"
        return per_operation(self.aws_calls, self.messages / 1000, ".2f")


async def produce_ours(url: str, count: int, size: int) -> float:
    async with AsyncDurableStream(url) as stream:
        await stream.head()  # as the TypeScript client's connect(): outside the timing
        producer = IdempotentProducer(stream, "bench-ours")
        started = time.perf_counter()
        for i in range(count):
            await producer.append(message(i, size))
        await producer.flush()
        seconds = time.perf_counter() - started
        await producer.detach()
    return seconds


def produce_ts(url: str, count: int, size: int) -> float:
    done = run_ts_client("produce", url, "bench-ts", str(count), str(size), timeout=900)
    if done["errors"]:
        raise RuntimeError(f"the TypeScript producer reported errors: {done['errors'][:3]}")
    return float(done["seconds"])


def check_stream(url: str, count: int, size: int) -> list[str]:
    with DurableStream(url) as stream:
        stored = b"".join(batch.data for batch in stream.read())
    sent = b"".join(message(i, size) for i in range(count))
    if stored == sent:
        return []
    return [f"{url}: {len(stored)} bytes stored, {len(sent)} sent, or different bytes"]


def measure(
    server: str, base: str, counter_url: str | None, size_name: str, count: int, producer: str
) -> Run:
    size = SIZES[size_name]
    url = f"{base}/bench-{producer}-{size}-{uuid.uuid4().hex[:8]}"
    with DurableStream(url) as stream:
        stream.create("application/octet-stream")
    if counter_url is not None:
        httpx.delete(counter_url)
    if producer == "ours":
        seconds = asyncio.run(produce_ours(url, count, size))
    else:
        seconds = produce_ts(url, count, size)
    calls = Counter(httpx.get(counter_url).json()) if counter_url is not None else None
    run = Run(server, size_name, producer, count, count * size, seconds, calls)
    run.problems = check_stream(url, count, size)
    return run


@contextlib.contextmanager
def servers() -> Iterator[list[tuple[str, str, str | None]]]:
    """(label, streams base URL, AWS call counter URL or None) for each server measured."""
    with dsaws_serve() as embedded, counted_emulator() as endpoint:
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
        env |= {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
        name = f"bench-{uuid.uuid4().hex[:8]}"
        with dsaws_serve("--aws", "--table", name, "--bucket", name, env=env) as counted:
            yield [
                ("dsaws serve", embedded, None),
                ("dsaws serve --aws, emulator apart", counted, f"{endpoint}/__calls"),
            ]


COLUMNS = (
    "server",
    "message",
    "producer",
    "messages",
    "seconds",
    "messages/s",
    "MB/s",
    "AWS calls / 1000 messages",
    "by operation, per 1000 messages",
)


def print_runs(runs: list[Run]) -> None:
    rows = (
        [
            run.server,
            run.size,
            run.producer,
            run.messages,
            f"{run.seconds:.2f}",
            f"{run.per_second:,.0f}",
            f"{run.megabytes_per_second:.2f}",
            run.aws_calls_per_thousand(),
            run.aws_call_detail(),
        ]
        for run in runs
    )
    print_table(COLUMNS, "<<<>>>>><", rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100_000, help="100 B messages per run")
    parser.add_argument("--large", type=int, default=5_000, help="4 KiB messages per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each; the median shows")
    args = parser.parse_args(argv)
    counts = {"100 B": args.small, "4 KiB": args.large}
    medians: list[Run] = []
    problems: list[str] = []
    with servers() as measured:
        for label, base, counter_url in measured:
            for size_name, count in counts.items():
                for producer in ("ours", "typescript"):
                    runs = []
                    for _ in range(args.repeats):
                        run = measure(label, base, counter_url, size_name, count, producer)
                        problems += run.problems
                        runs.append(run)
                        print(
                            f"{label}, {size_name}, {producer}: {run.per_second:,.0f} messages/s",
                            file=sys.stderr,
                        )
                    medians.append(sorted(runs, key=lambda r: r.seconds)[len(runs) // 2])
    print_runs(medians)
    for problem in problems:
        print("WRONG:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
