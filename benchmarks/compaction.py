"""State Protocol compaction: what a stream's new reader needs before and after compaction, and
what compacting costs.

Writes `--keys` rows (1,000) each updated `--updates` times (100) as State Protocol change
messages of 100 bytes (an insert, then updates: about 10 MB of history for the defaults), in
appends of `--messages-per-append` (100) to a JSON stream created with `Stream-Retention:
compact`, through `dsaws serve --aws` on the emulator in a process of its own (which counts the
AWS calls it answers; the server's background sealer, retention runs and collector are off).
This process then seals the whole stream, compacts it and removes what the compaction left
behind, against the same table and bucket, its own AWS calls counted with botocore hooks:
`Sealer` (hot bytes 0), `RetentionRun` (announce delay 0, retire grace 0) run twice (the first
folds the history into a snapshot and announces the cut, the second records it and deletes
the history's items below it), then `Collector` (orphan grace 0) for the objects those items
named.

Before compaction (history sealed) and after (snapshot in effect, history removed): the bytes
stored (DynamoDB, billed, and S3), and what a new reader needs over HTTP from `offset=-1`:
bytes downloaded, responses, the AWS calls the server made for them, and the time until it
holds the materialized state (each response's messages folded into a dict as they come). Both
states must equal the rows written. The server wrote the stream, but sealed history and
snapshots are read alike by every instance, from S3.

    python -m benchmarks.compaction [--keys 1000] [--updates 100] [--quick]

`--quick` writes 600 keys (6 MB) instead; `tests/integration/test_compaction_benchmark.py` runs
it.

Targets (the script exits non-zero when one is missed): a new reader downloads under 2% of
what it downloaded before compaction, and compaction costs under 2 AWS calls per MB compacted:
the stream's calls in the two retention runs. Each run also lists the streams that have a
policy, 16 Queries whatever they are: printed apart, as the run's cost rather than a stream's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks._processes import counted_emulator, dsaws_serve
from benchmarks._reads import responses_from_start
from benchmarks._report import per_operation, print_table
from benchmarks._stats import Timed
from benchmarks.aws_calls import CallMeter
from benchmarks.counted_emulator import CALLS_PATH
from benchmarks.storage_cost import MB, Footprint, footprint
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.protocol.headers import STREAM_RETENTION
from durable_streams_aws.core.runtime import (
    Backend,
    build_backend,
    seal_policy,
    use_emulator_credentials,
)
from durable_streams_aws.core.storage import Sealer
from durable_streams_aws.core.storage._items import RETENTION_PREFIX
from durable_streams_aws.core.storage.gc import Collector
from durable_streams_aws.core.storage.retention import RetentionReport, RetentionRun

MESSAGE_BYTES = 100
PATH = "state/rows"
JSON = "application/json"
DOWNLOAD_TARGET = 0.02  # of what a new reader downloaded before compaction
CALLS_PER_MB_TARGET = 2.0  # AWS calls of the retention runs per MB compacted
# A compaction's own calls are about ten whatever the history (the stream's item, the fold's
# reads, the snapshot's PUT and transaction, the record, the retirement): the per-MB target
# holds from about 5 MB compacted, so the quick run keeps 6 MB.
QUICK_KEYS = 600
MAX_RUNS = 5  # announce, record and retire take two
# The server runs none of its background sweeps: this process runs them, counted.
SERVE_ENV = {"DS_SEAL_INTERVAL": "0", "DS_RETENTION_INTERVAL": "0", "DS_COLLECT_INTERVAL": "0"}

Row = tuple[str, str]


def change(key: int, version: int) -> bytes:
    """The `version`th change of row `key` (an insert first, then updates), MESSAGE_BYTES long."""
    operation = "insert" if version == 0 else "update"
    message = {
        "type": "row",
        "key": f"k{key:05d}",
        "value": {"v": version, "p": ""},
        "headers": {"operation": operation},
    }
    bare = len(encode(message))
    if bare > MESSAGE_BYTES:
        raise ValueError(f"a change message takes {bare} bytes, more than {MESSAGE_BYTES}")
    message["value"]["p"] = "x" * (MESSAGE_BYTES - bare)
    return encode(message)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def history(keys: int, updates: int) -> Iterator[bytes]:
    """Every row inserted, then updated in rounds: each round changes every row once."""
    for version in range(updates):
        for key in range(keys):
            yield change(key, version)


def expected_state(keys: int, updates: int) -> dict[Row, Any]:
    return {
        ("row", f"k{key:05d}"): json.loads(change(key, updates - 1))["value"] for key in range(keys)
    }


def write(client: httpx.Client, url: str, keys: int, updates: int, per_append: int) -> int:
    """The stream, created compacted, and its history in appends of `per_append` messages;
    the number of appends."""
    client.put(url, headers={"Content-Type": JSON, STREAM_RETENTION: "compact"}).raise_for_status()
    batch: list[bytes] = []
    appends = 0
    for message in history(keys, updates):
        batch.append(message)
        if len(batch) == per_append:
            appends += append(client, url, batch)
            batch = []
    if batch:
        appends += append(client, url, batch)
    return appends


def append(client: httpx.Client, url: str, batch: list[bytes]) -> int:
    body = b"[" + b",".join(batch) + b"]"
    client.post(url, content=body, headers={"Content-Type": JSON}).raise_for_status()
    return 1


def fold_into(state: dict[Row, Any], messages: list[dict[str, Any]]) -> None:
    """What a State Protocol client does with the messages it reads: each change applied to
    its row, a reset empties the state, the snapshot markers carry no rows."""
    for message in messages:
        headers = message["headers"]
        control = headers.get("control")
        if control == "reset":
            state.clear()
        elif control is None:
            row = (message["type"], message["key"])
            if headers["operation"] == "delete":
                state.pop(row, None)
            else:
                state[row] = message["value"]


@dataclass
class NewReader:
    responses: int
    body_bytes: int
    calls: Counter[str]
    seconds: float  # to the materialized state
    state: dict[Row, Any]

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


def new_reader(client: httpx.Client, url: str, calls_url: str) -> NewReader:
    """A reader that starts at `offset=-1` and folds as it reads; the server's AWS calls for
    it, from the emulator's count."""
    httpx.delete(calls_url)
    state: dict[Row, Any] = {}
    responses = body_bytes = 0
    with Timed() as timed:
        for answer in responses_from_start(client, url):
            responses += 1
            body_bytes += len(answer.content)
            fold_into(state, answer.json())
    calls = Counter(httpx.get(calls_url).json())
    return NewReader(responses, body_bytes, calls, timed.seconds, state)


@dataclass
class StepMeter(CallMeter):
    """A CallMeter that also counts apart the Queries by which a retention run lists the
    streams that have a policy: one per shard of that list (16) each run, whatever the streams
    and however many, so a run's cost and not a stream's."""

    listing: int = 0

    def attach(self, client: Any) -> None:
        super().attach(client)
        client.meta.events.register("before-parameter-build.dynamodb.Query", self._query)

    def _query(self, params: dict[str, Any], **_: Any) -> None:
        partition = params.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S", "")
        self.listing += partition.startswith(RETENTION_PREFIX)

    def reset(self) -> None:
        super().reset()
        self.listing = 0


@dataclass
class Step:
    name: str
    seconds: float
    calls: Counter[str]
    report: Any
    listing: int = 0  # of the calls, the Queries that list the streams with a policy

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def stream_calls(self) -> int:
        """The calls this stream's work made (the run's listing left out)."""
        return self.total_calls - self.listing


def step(meter: StepMeter, name: str, action: Callable[[], Any]) -> Step:
    """`action` run once, its AWS calls counted by `meter` (attached to the store's clients)."""
    meter.reset()
    started = time.perf_counter()
    report = action()
    seconds = time.perf_counter() - started
    return Step(name, seconds, Counter(meter.calls), report, meter.listing)


@dataclass
class Measurement:
    keys: int
    updates: int
    history_bytes: int
    appends: int
    append_seconds: float
    sealing: Step
    before: Footprint
    after: Footprint
    read_before: NewReader
    read_after: NewReader
    runs: list[Step]  # the retention runs, in order
    collection: Step

    @property
    def compacted_bytes(self) -> int:
        return sum(run.report.bytes_compacted for run in self.runs)

    @property
    def compaction_calls(self) -> int:
        """The stream's calls in the retention runs (their listing of streams left out)."""
        return sum(run.stream_calls for run in self.runs)

    @property
    def listing_calls(self) -> int:
        return sum(run.listing for run in self.runs)

    def per_mb(self, calls: int) -> float:
        return calls / (self.compacted_bytes / MB)

    @property
    def downloaded_share(self) -> float:
        return self.read_after.body_bytes / self.read_before.body_bytes


def compact(backend: Backend, meter: StepMeter) -> tuple[list[Step], Step]:
    """The retention runs, until one finds nothing left to do, then the collector."""
    retention = RetentionRun(backend.store, delay=0, retire_grace=0, compaction_min_bytes=1)
    runs: list[Step] = []
    for _ in range(MAX_RUNS):
        run = step(meter, f"retention run {len(runs) + 1}", retention.run)
        report: RetentionReport = run.report
        if report.streams_failed or report.races_lost:
            raise SystemExit(f"{run.name} failed on a quiet table: {report}")
        if not (report.cuts_announced or report.cuts_recorded or report.items_retired):
            break
        runs.append(run)
    else:
        raise SystemExit(f"retention still had work after {MAX_RUNS} runs")
    collector = Collector(backend.store, orphan_grace_seconds=0)
    return runs, step(meter, "collector", collector.run)


def measure(keys: int, updates: int, per_append: int) -> Measurement:
    use_emulator_credentials()
    name = f"compaction-{uuid.uuid4().hex[:8]}"
    settings = Settings(table=name, bucket=name, seal_hot_bytes=0)
    with counted_emulator() as endpoint:
        env = {"AWS_ENDPOINT_URL": endpoint, "DS_TABLE": name, "DS_BUCKET": name, **SERVE_ENV}
        with dsaws_serve("--aws", env=env) as streams, httpx.Client(timeout=60) as client:
            url = f"{streams}/{PATH}"
            calls_url = f"{endpoint}{CALLS_PATH}"
            started = time.perf_counter()
            appends = write(client, url, keys, updates, per_append)
            append_seconds = time.perf_counter() - started
            backend = build_backend(settings, endpoint=endpoint)
            meter = StepMeter()
            meter.attach_backend(backend)
            sealer = Sealer(backend.store, seal_policy(settings))
            sealing = step(meter, "sealing", lambda: sealer.seal(PATH))
            before = footprint(backend)
            read_before = new_reader(client, url, calls_url)
            runs, collection = compact(backend, meter)
            after = footprint(backend)
            read_after = new_reader(client, url, calls_url)
    expected = expected_state(keys, updates)
    for label, read in (("before", read_before), ("after", read_after)):
        if read.state != expected:
            raise SystemExit(f"the state read {label} compaction is not the rows written")
    return Measurement(
        keys,
        updates,
        keys * updates * MESSAGE_BYTES,
        appends,
        append_seconds,
        sealing,
        before,
        after,
        read_before,
        read_after,
        runs,
        collection,
    )


def targets(m: Measurement) -> list[tuple[str, bool]]:
    share, per_mb = m.downloaded_share, m.per_mb(m.compaction_calls)
    return [
        (
            f"a new reader downloads {share:.2%} of the uncompacted history"
            f" (target: under {DOWNLOAD_TARGET:.0%})",
            share < DOWNLOAD_TARGET,
        ),
        (
            f"compaction costs {per_mb:.2f} AWS calls per MB compacted (the stream's calls in"
            " the retention runs)"
            f" (target: under {CALLS_PER_MB_TARGET:g})",
            per_mb < CALLS_PER_MB_TARGET,
        ),
    ]


def comparison_rows(m: Measurement) -> list[tuple[str, str, str]]:
    def stored(f: Footprint) -> str:
        return f"{(f.item_bytes + f.object_bytes) / MB:.3f} MB"

    def calls(read: NewReader) -> str:
        return f"{read.total_calls} ({per_operation(read.calls, 1, 'g')})"

    before, after = m.read_before, m.read_after
    return [
        ("DynamoDB items", f"{m.before.items:,}", f"{m.after.items:,}"),
        (
            "DynamoDB bytes (billed)",
            f"{m.before.item_bytes / MB:.3f} MB",
            f"{m.after.item_bytes / MB:.3f} MB",
        ),
        ("S3 objects", f"{m.before.objects:,}", f"{m.after.objects:,}"),
        ("S3 bytes", f"{m.before.object_bytes / MB:.3f} MB", f"{m.after.object_bytes / MB:.3f} MB"),
        ("bytes stored", stored(m.before), stored(m.after)),
        (
            "new reader: bytes downloaded",
            f"{before.body_bytes / MB:.3f} MB",
            f"{after.body_bytes / MB:.3f} MB ({m.downloaded_share:.2%})",
        ),
        ("new reader: requests", f"{before.responses}", f"{after.responses}"),
        ("new reader: server's AWS calls", calls(before), calls(after)),
        (
            "new reader: time to materialized state",
            f"{before.seconds * 1000:.0f} ms",
            f"{after.seconds * 1000:.0f} ms",
        ),
        ("rows materialized", f"{len(before.state):,}", f"{len(after.state):,}"),
    ]


def step_rows(m: Measurement) -> Iterator[tuple[str, ...]]:
    for s in [m.sealing, *m.runs, m.collection]:
        yield (
            s.name,
            f"{s.seconds:.2f}",
            f"{s.total_calls}",
            f"{s.listing}",
            per_operation(s.calls, 1, "g"),
            ", ".join(f"{k} {v:,}" for k, v in s.report.as_dict().items() if v),
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=100, help="changes of each row")
    parser.add_argument("--messages-per-append", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_KEYS} keys")
    args = parser.parse_args(argv)
    keys = QUICK_KEYS if args.quick else args.keys
    m = measure(keys, args.updates, args.messages_per_append)
    print(
        f"wrote {m.history_bytes / MB:.1f} MB: {m.keys:,} keys x {m.updates} changes of"
        f" {MESSAGE_BYTES} B in {m.appends:,} appends ({m.append_seconds:.1f} s, `dsaws serve"
        " --aws` on the emulator apart)\n"
    )
    print_table(("", "before compaction (sealed)", "after compaction"), "<>>", comparison_rows(m))
    print()
    print_table(
        ("step (in-process)", "seconds", "AWS calls", "of which listing", "by operation", "report"),
        "<>>><<",
        step_rows(m),
    )
    listing = m.listing_calls
    print(
        f"\ncompaction: {m.compacted_bytes / MB:.2f} MB folded in"
        f" {sum(run.seconds for run in m.runs):.2f} s; the stream's AWS calls"
        f" {m.compaction_calls} ({m.per_mb(m.compaction_calls):.2f} per MB), with the runs'"
        f" listing of streams with a policy {m.compaction_calls + listing}"
        f" ({m.per_mb(m.compaction_calls + listing):.2f} per MB); then the collector's"
        f" {m.collection.total_calls}\n"
    )
    checks = targets(m)
    for text, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'} {text}")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
