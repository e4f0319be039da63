"""Many writers on one stream, as a deployment serves them: N Lambda-like workers (each a
process that imports `functions.api` and invokes its handler one request at a time, as a
Lambda container does) over the emulator in a process of its own, every AWS call of which
takes 4 to 12 ms (in-region latency).

    python -m benchmarks.hot_stream [--writers 1,4,8,16] [--seconds 8] [--latency 4,12]
                                    [--modes plain,producer,streams] [--record-bytes 100]
                                    [--dynamodb-local]

`--dynamodb-local`: DynamoDB is Amazon's DynamoDB Local (its calls still counted and delayed by
the emulator's process, which passes them on: each takes `--latency` plus DynamoDB Local's own
time), S3 the emulator's.

Modes: `plain` (N writers append to one stream), `producer` (the same, each writer an
idempotent producer with its own id), `streams` (N writers, each on a stream of its own).
For each row it prints acknowledged appends per second, latency p50/p99, answers that were
not 2xx by status, and DynamoDB calls per acknowledged append (in all and by operation), and
it reads every stream back and checks that each acknowledged record is there exactly once, at
the offset its acknowledgement named, and that no record is there twice.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks._processes import ROOT, counted_emulator
from benchmarks._report import print_table
from benchmarks._stats import percentile_ms

BASE = "/v1/stream"
ANSWER = "ANSWER "  # a worker's lines of results (the function also prints its EMF metrics)


# ---------------------------------------------------------------- one worker (a "container")


def _worker(args: argparse.Namespace) -> None:
    """Imports the API function as a Lambda container would, says it is ready, waits for the
    start time on stdin, then appends until the end time; prints one JSON line per append."""
    from durable_streams_aws.functions.api import handler
    from durable_streams_aws.infra.lambda_bridge import LambdaContext, function_url_event

    print("ready", flush=True)
    start_at = float(sys.stdin.readline())
    stream = f"{BASE}/{args.stream}"
    headers = [("content-type", "text/plain")]
    context = LambdaContext()
    time.sleep(max(0.0, start_at - time.time()))
    end_at = start_at + args.seconds
    seq = 0
    while time.time() < end_at:
        record = f"{args.name}-{seq:07d}|".encode().ljust(args.record_bytes, b".")
        request = list(headers)
        if args.producer:
            request += [
                ("producer-id", args.name),
                ("producer-epoch", "0"),
                ("producer-seq", str(seq)),
            ]
        event = function_url_event("POST", stream, request, record, "127.0.0.1")
        started = time.perf_counter()
        answer = handler(event, context)
        took = time.perf_counter() - started
        answer_headers = {k.lower(): v for k, v in (answer.get("headers") or {}).items()}
        print(
            ANSWER
            + json.dumps(
                {
                    "record": record.decode(),
                    "status": answer["statusCode"],
                    "offset": answer_headers.get("stream-next-offset"),
                    "seconds": took,
                }
            ),
            flush=True,
        )
        if answer["statusCode"] < 300 or not args.producer:
            seq += 1  # a producer sends a refused seq again, as a producer client would


# ---------------------------------------------------------------- the run


@dataclass
class Result:
    mode: str
    writers: int
    seconds: float
    answers: list[dict[str, Any]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    metrics: Counter[str] = field(default_factory=Counter)  # the function's own (EMF)

    @property
    def acknowledged(self) -> list[dict[str, Any]]:
        return [a for a in self.answers if 200 <= a["status"] < 300]

    @property
    def dynamodb_calls(self) -> int:
        return sum(n for name, n in self.calls.items() if not name.startswith("S3"))

    def calls_per_ack(self) -> float:
        return self.dynamodb_calls / max(1, len(self.acknowledged))

    def percentile_ms(self, fraction: float) -> float:
        return percentile_ms((a["seconds"] for a in self.acknowledged), fraction)

    def retries_per_ack(self) -> float:
        """Attempts an append made again (a lost race, a voided range, waiting for ranges
        below to settle), per acknowledged append."""
        return self.metrics["ConditionalWriteRetries"] / max(1, len(self.acknowledged))

    def refused(self) -> dict[int, int]:
        return dict(Counter(a["status"] for a in self.answers if a["status"] >= 300))

    def by_operation(self) -> str:
        acks = max(1, len(self.acknowledged))
        parts = [f"{name} {n / acks:.2f}" for name, n in self.calls.most_common()]
        return ", ".join(parts)


def _environment(endpoint: str, table: str, bucket: str, extra: dict[str, str]) -> dict[str, str]:
    from durable_streams_aws.infra.lambda_bridge import lambda_environment

    return {**os.environ, **lambda_environment(endpoint, table, bucket), **extra}


def run(endpoint: str, mode: str, writers: int, seconds: float, record_bytes: int) -> Result:
    from durable_streams_aws.core.config import Settings
    from durable_streams_aws.core.runtime import build_backend, ensure_resources
    from durable_streams_aws.core.storage import CreateSpec

    suffix = uuid.uuid4().hex[:8]
    table, bucket = f"hot-{suffix}", f"hot-{suffix}"
    backend = build_backend(Settings(table=table, bucket=bucket), endpoint=endpoint)
    ensure_resources(backend)
    streams = [f"hot-{i}" for i in range(writers)] if mode == "streams" else ["hot"]
    for path in streams:
        backend.store.create(path, CreateSpec(content_type="text/plain"))
    env = _environment(endpoint, table, bucket, {})
    workers = []
    for index in range(writers):
        command = [
            sys.executable, "-m", "benchmarks.hot_stream", "--worker",
            "--name", f"w{index:02d}",
            "--stream", streams[index % len(streams)],
            "--seconds", str(seconds),
            "--record-bytes", str(record_bytes),
        ]  # fmt: skip
        if mode == "producer":
            command.append("--producer")
        workers.append(
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"a worker did not start: {line!r}")
    httpx.delete(f"{endpoint}/__calls")
    start_at = time.time() + 0.5
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(f"{start_at}\n")
        worker.stdin.flush()
    result = Result(mode, writers, seconds)
    for worker in workers:
        out, _ = worker.communicate(timeout=seconds + 120)
        lines = out.splitlines()
        result.answers += [
            json.loads(line[len(ANSWER) :]) for line in lines if line.startswith(ANSWER)
        ]
        result.metrics += _emf_counts(lines)
    result.calls = Counter(httpx.get(f"{endpoint}/__calls").json())
    result.problems = _check(backend.store, streams, result.acknowledged, record_bytes)
    return result


def _emf_counts(lines: list[str]) -> Counter[str]:
    """The sums of the metrics the function printed (Powertools' EMF lines)."""
    counts: Counter[str] = Counter()
    for line in lines:
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        document = json.loads(line)
        for directive in document["_aws"].get("CloudWatchMetrics", []):
            for metric in directive.get("Metrics", []):
                value = document.get(metric["Name"], 0)
                counts[metric["Name"]] += sum(value) if isinstance(value, list) else value
    return counts


def _check(store: Any, streams: list[str], acked: list[dict[str, Any]], size: int) -> list[str]:
    """Every acknowledged record once, at its offset; no record twice."""
    from durable_streams_aws.core.protocol.offsets import parse_position

    problems: list[str] = []
    contents: dict[str, bytes] = {}
    for path in streams:
        info = store.get(path)
        # Each byte at its offset: a range voided under load (its writer too slow, then
        # reserving anew) holds nothing, and reads as zero bytes here.
        data, position = bytearray(info.tail), 0
        while position < info.tail:
            batch = store.read(info, position, 1 << 20)
            if batch.end == position:
                problems.append(f"{path}: the read stopped at {position} of {info.tail}")
                break
            data[batch.start : batch.end] = batch.data
            position = batch.end
        contents[path] = bytes(data)
    seen: Counter[bytes] = Counter()
    for data in contents.values():
        packed = data.replace(b"\0", b"")
        for at in range(0, len(packed) - size + 1, size):
            seen[packed[at : at + size]] += 1
    doubled = [record for record, count in seen.items() if count > 1]
    if doubled:
        problems.append(f"{len(doubled)} records stored more than once")
    for answer in acked:
        record = answer["record"].encode()
        if seen[record] != 1:
            problems.append(f"acknowledged {answer['record'][:12]} stored {seen[record]} times")
            continue
        end = parse_position(answer["offset"]) if answer["offset"] else None
        if end is None or not any(d[end - size : end] == record for d in contents.values()):
            problems.append(f"acknowledged {answer['record'][:12]} not at its offset")
    return problems[:20]


def _print(results: list[Result]) -> None:
    print()
    print_table(COLUMNS, "<" * len(COLUMNS), (_row(r) for r in results))


COLUMNS = (
    "mode",
    "writers",
    "acked appends/s",
    "p50",
    "p99",
    "not 2xx",
    "DynamoDB calls per ack",
    "by operation (per ack)",
    "retries per ack",
    "exactly once",
)


def _row(r: Result) -> list[object]:
    return [
        r.mode,
        r.writers,
        f"{len(r.acknowledged) / r.seconds:.0f}",
        f"{r.percentile_ms(0.5):.0f} ms",
        f"{r.percentile_ms(0.99):.0f} ms",
        r.refused() or "-",
        f"{r.calls_per_ack():.2f}",
        r.by_operation(),
        f"{r.retries_per_ack():.3f}",
        "yes" if not r.problems else "NO: " + "; ".join(r.problems),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", default="1,4,8,16")
    parser.add_argument("--modes", default="plain,producer,streams")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--latency", default="4,12", help="LOW,HIGH ms per AWS call")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--dynamodb-local", action="store_true", help="DynamoDB on DynamoDB Local")
    # A worker's own arguments (the benchmark starts its workers with them).
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--stream", help=argparse.SUPPRESS)
    parser.add_argument("--producer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    low, high = (float(part) for part in args.latency.split(","))
    from durable_streams_aws.core.runtime import use_emulator_credentials

    use_emulator_credentials()
    results = []
    with counted_emulator((low, high), dynamodb_local=args.dynamodb_local) as endpoint:
        for mode in args.modes.split(","):
            for writers in (int(n) for n in args.writers.split(",")):
                if mode == "streams" and writers == 1:
                    continue  # the same as one writer on one stream
                result = run(endpoint, mode, writers, args.seconds, args.record_bytes)
                results.append(result)
                _print([result])
    tables = "DynamoDB Local" if args.dynamodb_local else "the emulator's DynamoDB"
    print(f"\nAll rows ({args.seconds:g} s each, {low:g}-{high:g} ms per AWS call, {tables}):")
    _print(results)
    if any(r.problems for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
