"""Subscriptions: what they add to each append, and how soon a webhook hears of one.

Runs the real app in-process (httpx over ASGI) on the embedded emulator, with the in-process
delivery that `dsaws serve` runs (a deployment runs the same code from SQS), and a local
webhook receiver that answers {"done": true}. Prints two tables:

- AWS calls per append for 0, 1 and 100 webhook subscriptions matching the stream, split into
  the append request's own calls, the delivery work's calls, and the tasks queued (each one
  SQS SendMessage in a deployment; the SQS receive side is Lambda's event source mapping).
  Measured twice: appends spaced out (each wakes every idle subscription) and a burst (appends
  arriving while wakes are in flight, which coalesce).
- Wake latency from an append's request to the webhook's receipt, p50 and p99.

    python -m benchmarks.subscriptions [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from benchmarks._report import table_header, table_row
from benchmarks._stats import percentile
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import (
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.infra.emulator import IN_PROCESS_ENDPOINT, Emulator

PATTERN = "bench/*"
STREAM = "bench/events"
DELIVERY_THREAD_PREFIX = "subscriptions"


@dataclass
class RoleMeter:
    """AWS calls counted by who made them: the request path or the delivery threads."""

    request: Counter[str] = field(default_factory=Counter)
    delivery: Counter[str] = field(default_factory=Counter)
    # Items the request path writes: each one a DynamoDB Streams record, were the table's
    # stream what noticed appends.
    request_item_writes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call", self._count)
        client.meta.events.register("provide-client-params.dynamodb", self._count_writes)

    def _count_writes(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if threading.current_thread().name.startswith(DELIVERY_THREAD_PREFIX):
            return
        writes = {"PutItem": 1, "UpdateItem": 1, "DeleteItem": 1}.get(model.name, 0)
        if model.name == "TransactWriteItems":
            writes = sum(1 for action in params["TransactItems"] if "ConditionCheck" not in action)
        elif model.name == "BatchWriteItem":
            writes = sum(len(requests) for requests in params["RequestItems"].values())
        with self.lock:
            self.request_item_writes += writes

    def _count(self, model: Any, **_: Any) -> None:
        name = threading.current_thread().name
        with self.lock:
            (self.delivery if name.startswith(DELIVERY_THREAD_PREFIX) else self.request)[
                model.name
            ] += 1

    def reset(self) -> None:
        with self.lock:
            self.request.clear()
            self.delivery.clear()
            self.request_item_writes = 0


class Receiver:
    """Answers every wake with {"done": true}; records when each arrived."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, dict[str, Any]]] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                now = time.perf_counter()
                answer = b'{"done": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                with receiver.arrived:
                    receiver.arrivals.append((now, json.loads(body)))
                    receiver.arrived.notify_all()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 30.0) -> bool:
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.arrivals) >= count, timeout)


@dataclass
class Setup:
    client: httpx.AsyncClient
    meter: RoleMeter
    queued: Counter[str]
    service: Any


def _setup(emulator: Emulator, subscriptions: bool = True) -> Setup:
    name = f"bench-subs-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        table=name,
        bucket=name,
        seal_interval=0,
        webhook_secret="benchmark",
        subscriptions=subscriptions,
        # The sweep's reads are per minute in a deployment, not per append: left out here.
        subscription_sweep_seconds=0,
    )
    backend = build_backend(settings, endpoint=IN_PROCESS_ENDPOINT)
    emulator.connect(backend.dynamodb)
    emulator.connect(backend.s3)
    ensure_resources(backend)
    meter = RoleMeter()
    meter.attach(backend.dynamodb)
    meter.attach(backend.s3)
    app = backend.app()
    service = getattr(app.state, "subscriptions", None)
    queued: Counter[str] = Counter()
    if service is not None:
        scheduler = service.scheduler
        original = scheduler.send

        def counted(task: Any, delay: float = 0.0) -> None:
            queued[task.kind.value] += 1
            original(task, delay)

        scheduler.send = counted
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="http://bench.local")
    return Setup(client, meter, queued, service)


async def _append(client: httpx.AsyncClient, index: int) -> None:
    response = await client.post(
        f"/v1/stream/{STREAM}",
        content=f"event {index}\n".encode(),
        headers={"Content-Type": "text/plain"},
    )
    assert response.status_code == 204, response.text


async def _settled(setup: Setup, tail: str, subscriptions: int, timeout: float = 60.0) -> None:
    """Wait until every subscription has acked the stream's tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        acked = 0
        for index in range(subscriptions):
            state = (await setup.client.get(f"/v1/stream/__ds/subscriptions/s{index}")).json()
            offsets = {s["path"]: s["acked_offset"] for s in state["streams"]}
            acked += offsets.get(STREAM) == tail
        if acked == subscriptions:
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"subscriptions did not catch up within {timeout} s")


async def calls_per_append(
    emulator: Emulator, subscriptions: int | None, appends: int, spacing: float
) -> dict[str, Any]:
    """`subscriptions` None: the subscription API turned off (the baseline)."""
    setup = _setup(emulator, subscriptions is not None)
    subscriptions = subscriptions or 0
    receiver = Receiver()
    try:
        await setup.client.put(
            f"/v1/stream/{STREAM}", content=b"", headers={"Content-Type": "text/plain"}
        )
        for index in range(subscriptions):
            created = await setup.client.put(
                f"/v1/stream/__ds/subscriptions/s{index}",
                json={"type": "webhook", "pattern": PATTERN, "webhook": {"url": receiver.url}},
            )
            assert created.status_code == 201, created.text
        await asyncio.sleep(4)  # the creations' own checks run and find nothing pending
        setup.meter.reset()
        setup.queued.clear()
        started = time.perf_counter()
        for index in range(appends):
            await _append(setup.client, index)
            if spacing:
                await asyncio.sleep(spacing)
        head = await setup.client.head(f"/v1/stream/{STREAM}")
        tail = head.headers["Stream-Next-Offset"]
        if subscriptions:
            # Reading the subscriptions to see they caught up must not be counted.
            request_calls = sum(setup.meter.request.values())
            await _settled(setup, tail, subscriptions)
            setup.meter.request.clear()
            setup.meter.request["counted"] = request_calls
        elapsed = time.perf_counter() - started
        request = sum(setup.meter.request.values()) / appends
        delivery = sum(setup.meter.delivery.values()) / appends
        return {
            "item_writes": setup.meter.request_item_writes / appends,
            "request": request,
            "delivery": delivery,
            "queued": sum(setup.queued.values()) / appends,
            "webhooks": len(receiver.arrivals) / appends,
            "seconds": elapsed,
            "detail": dict(setup.meter.delivery.most_common(4)),  # type: ignore[dict-item]
        }
    finally:
        receiver.server.shutdown()
        await setup.client.aclose()
        if setup.service is not None:
            setup.service.stop()


async def wake_latency(emulator: Emulator, samples: int) -> list[float]:
    setup = _setup(emulator)
    receiver = Receiver()
    try:
        await setup.client.put(
            f"/v1/stream/{STREAM}", content=b"", headers={"Content-Type": "text/plain"}
        )
        await setup.client.put(
            "/v1/stream/__ds/subscriptions/latency",
            json={"type": "webhook", "pattern": PATTERN, "webhook": {"url": receiver.url}},
        )
        await asyncio.sleep(4)
        latencies = []
        for index in range(samples):
            before = len(receiver.arrivals)
            sent = time.perf_counter()
            await _append(setup.client, index)
            if not await asyncio.to_thread(receiver.wait_for, before + 1):
                raise SystemExit("a wake never arrived")
            latencies.append((receiver.arrivals[before][0] - sent) * 1000)
            await asyncio.sleep(0.05)  # let the done answer's auto-ack land: the next is idle
        return latencies
    finally:
        receiver.server.shutdown()
        await setup.client.aclose()
        setup.service.stop()


COLUMNS = (
    "subscriptions",
    "appends",
    "request path",
    "of which item writes",
    "delivery",
    "tasks queued (SQS)",
    "webhooks",
    "delivery calls, most frequent",
)


async def _cost_row(
    emulator: Emulator, subscriptions: int | None, appends: int, label: str, spacing: float
) -> list[object]:
    row = await calls_per_append(emulator, subscriptions, appends, spacing)
    return [
        "API off" if subscriptions is None else subscriptions,
        f"{appends}, {label}",
        *(f"{row[n]:.2f}" for n in ("request", "item_writes", "delivery", "queued", "webhooks")),
        row["detail"],
    ]


async def _main(quick: bool) -> None:
    use_emulator_credentials()
    appends = 10 if quick else 40
    samples = 20 if quick else 100
    with Emulator() as emulator:
        print("AWS calls per append, by subscriptions matching the stream")
        print("\n".join(table_header(COLUMNS, "<" * len(COLUMNS))))
        for subscriptions in (None, 0, 1, 100):
            for label, spacing in (("spaced 300 ms", 0.3), ("burst", 0.0)):
                if subscriptions == 100 and quick and spacing:
                    continue
                print(table_row(await _cost_row(emulator, subscriptions, appends, label, spacing)))
        latencies = await wake_latency(emulator, samples)
        print()
        print(f"wake latency, append request to webhook receipt, 1 subscription ({samples}):")
        print(
            f"p50 {percentile(latencies, 0.5):.1f} ms, p99 {percentile(latencies, 0.99):.1f}"
            f" ms, max {max(latencies):.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer appends and samples")
    asyncio.run(_main(parser.parse_args().quick))


if __name__ == "__main__":
    main()
