"""The idempotent producer through a misbehaving proxy in front of `dsaws serve --aws` (whose
data lives in the emulator, so the server can be restarted mid-run). After each kind of fault
the stream holds every message exactly once, in order, and close() told the truth."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from fault_proxy import FORWARD, Action, FaultProxy, Seen
from support import ServerProcess

from durable_streams_aws.client import (
    AsyncDurableStream,
    IdempotentProducer,
    ProducerSettings,
    RetryPolicy,
)
from durable_streams_aws.infra.emulator import Emulator

pytestmark = pytest.mark.integration
MESSAGES = 200


@dataclass
class Origin:
    server: ServerProcess
    args: tuple[str, ...]
    env: dict[str, str]

    def restart(self) -> None:
        port = self.server.port
        self.server.stop()
        self.server = ServerProcess(*self.args, env=self.env, port=port).start()


@pytest.fixture
def origin(emulator: Emulator) -> Iterator[Origin]:
    name = f"faults-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "AWS_ENDPOINT_URL": emulator.endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
    args = ("--aws", "--table", name, "--bucket", name, "--long-poll-timeout", "1")
    running = Origin(ServerProcess(*args, env=env).start(), args, env)
    yield running
    running.server.stop()


def producer_posts(decide: Callable[[int], Action]) -> Callable[[Seen], Action]:
    """Apply `decide` to the n-th producer POST; everything else passes."""
    count = 0
    lock = threading.Lock()

    def rule(seen: Seen) -> Action:
        nonlocal count
        if seen.method != "POST" or "producer-id" not in seen.headers:
            return FORWARD
        with lock:
            count += 1
            return decide(count)

    return rule


def run_producer(proxy: FaultProxy, origin: Origin, in_flight: int = 4) -> list[object]:
    async def scenario() -> list[object]:
        url = f"http://127.0.0.1:{proxy.port}/v1/stream/p"
        async with httpx.AsyncClient(timeout=30) as client:
            stream = AsyncDurableStream(url, client=client)
            direct = AsyncDurableStream(f"{origin.server.base_url}/v1/stream/p", client=client)
            await direct.create("application/json")
            retry = RetryPolicy(max_attempts=40, base_delay=0.01, max_delay=0.5)
            settings = ProducerSettings(
                linger=0.002, max_batch_bytes=64, max_in_flight=in_flight, retry=retry
            )
            producer = IdempotentProducer(stream, "writer", settings=settings)
            for n in range(MESSAGES):
                await producer.append({"n": n})
            await producer.close({"n": "end"})
            direct = AsyncDurableStream(f"{origin.server.base_url}/v1/stream/p", client=client)
            return [m async for b in direct.read() for m in b.messages or []]

    return asyncio.run(scenario())


EXPECTED = [*({"n": n} for n in range(MESSAGES)), {"n": "end"}]


def check(proxy: FaultProxy, stored: list[object], fault: str) -> None:
    print(f"\n{fault}: {dict(proxy.counts)}; stream holds {len(stored)} messages")
    assert stored == EXPECTED


def test_requests_dropped_before_the_server(origin: Origin) -> None:
    rule = producer_posts(lambda n: Action(drop_before=True) if n % 3 == 0 else FORWARD)
    with FaultProxy(origin.server.port, rule) as proxy:
        check(proxy, run_producer(proxy, origin), "dropped before the server")
        assert proxy.counts["dropped before"] > 0


def test_answers_dropped_after_the_server_committed(origin: Origin) -> None:
    rule = producer_posts(lambda n: Action(drop_after=True) if n % 3 == 0 else FORWARD)
    with FaultProxy(origin.server.port, rule) as proxy:
        check(proxy, run_producer(proxy, origin), "dropped after the commit")
        assert proxy.counts["dropped after"] > 0


@pytest.mark.parametrize("status", [503, 429])
def test_errors_answered_instead_of_forwarding(origin: Origin, status: int) -> None:
    rule = producer_posts(
        lambda n: Action(status=status, retry_after="0") if n % 2 == 0 else FORWARD
    )
    with FaultProxy(origin.server.port, rule) as proxy:
        check(proxy, run_producer(proxy, origin), f"{status} instead of forwarding")
        assert proxy.counts[f"answered {status}"] > 0


def test_pipelined_requests_delayed_and_reordered(origin: Origin) -> None:
    rng = random.Random(3)
    rule = producer_posts(lambda n: Action(delay=rng.uniform(0, 0.05)))
    with FaultProxy(origin.server.port, rule) as proxy:
        check(proxy, run_producer(proxy, origin, in_flight=8), "delayed and reordered")


def test_the_server_restarted_mid_run(origin: Origin) -> None:
    restarted = threading.Event()

    def decide(n: int) -> Action:
        if n == 5 and not restarted.is_set():
            restarted.set()
            threading.Thread(target=origin.restart).start()
        return FORWARD

    with FaultProxy(origin.server.port, producer_posts(decide)) as proxy:
        check(proxy, run_producer(proxy, origin), "server restarted")
        assert restarted.is_set()
