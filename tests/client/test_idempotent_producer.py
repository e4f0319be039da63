"""The idempotent producer against the real app, through a transport that loses requests before
and after the server, answers 503 in its place, and delays requests so they overtake each other.
Afterwards the stream holds every acknowledged message exactly once, in order, and flush() and
close() told the truth."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import httpx
import pytest

from durable_streams_aws.client import (
    AsyncDurableStream,
    IdempotentProducer,
    ProducerError,
    ProducerSettings,
    RetryPolicy,
)
from durable_streams_aws.core.runtime import Backend

pytestmark = pytest.mark.integration
URL = "http://testserver/v1/stream/p"


@dataclass
class Faults:
    drop_before: float = 0.0
    drop_after: float = 0.0
    busy: float = 0.0
    max_delay: float = 0.0


class FaultyTransport(httpx.AsyncBaseTransport):
    """Between the client and the app: only producer appends are tampered with."""

    def __init__(self, inner: httpx.AsyncBaseTransport, faults: Faults, seed: int) -> None:
        self.inner = inner
        self.faults = faults
        self.rng = random.Random(seed)
        self.committed_then_dropped = 0
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "producer-id" not in request.headers:
            return await self.inner.handle_async_request(request)
        self.requests += 1
        f = self.faults
        if f.max_delay:
            await asyncio.sleep(self.rng.uniform(0, f.max_delay))
        roll = self.rng.random()
        if roll < f.drop_before:
            raise httpx.ConnectError("dropped before the server")
        if roll < f.drop_before + f.busy:
            return httpx.Response(503, headers={"Retry-After": "0"})
        response = await self.inner.handle_async_request(request)
        await response.aread()
        if self.rng.random() < f.drop_after:
            self.committed_then_dropped += 1
            raise httpx.ReadError("the answer was lost")
        return response


def produce(
    backend: Backend,
    faults: Faults,
    seed: int,
    count: int = 300,
    attempts: int = 30,
    close: bool = True,
    extend_by: int = 0,
) -> tuple[list[object], list[object], ProducerError | None, FaultyTransport]:
    """`count` messages appended one by one, or `extend_by` at a time."""

    async def scenario() -> tuple[
        list[object], list[object], ProducerError | None, FaultyTransport
    ]:
        app = backend.app()
        transport = FaultyTransport(httpx.ASGITransport(app=app), faults, seed)
        client = httpx.AsyncClient(transport=transport)
        stream = AsyncDurableStream(URL, client=client)
        await stream.create("application/json")
        retry = RetryPolicy(max_attempts=attempts, base_delay=0.0, max_delay=0.005)
        settings = ProducerSettings(linger=0.001, max_batch_bytes=64, max_in_flight=4, retry=retry)
        producer = IdempotentProducer(stream, "writer-1", settings=settings)
        sent = [{"n": n} for n in range(count)]
        failure = None
        try:
            if extend_by:
                for lo in range(0, count, extend_by):
                    await producer.extend(iter(sent[lo : lo + extend_by]))
            else:
                for message in sent:
                    await producer.append(message)
            await (producer.close({"n": "end"}) if close else producer.flush())
        except ProducerError as exc:
            failure = exc
        plain = AsyncDurableStream(
            URL, client=httpx.AsyncClient(transport=httpx.ASGITransport(app=app))
        )
        stored = [m for batch in [b async for b in plain.read()] for m in batch.messages or []]
        return sent, stored, failure, transport

    return asyncio.run(scenario())


@pytest.mark.parametrize("seed", range(3))
def test_every_message_once_and_in_order_through_every_fault(backend: Backend, seed: int) -> None:
    faults = Faults(drop_before=0.1, drop_after=0.1, busy=0.1, max_delay=0.01)
    sent, stored, failure, transport = produce(backend, faults, seed)
    assert failure is None, failure
    assert transport.committed_then_dropped > 0, transport.requests  # the dangerous case
    assert stored == [*sent, {"n": "end"}]


def test_extend_appends_each_value_in_order_through_every_fault(backend: Backend) -> None:
    faults = Faults(drop_before=0.1, drop_after=0.1, busy=0.1, max_delay=0.01)
    sent, stored, failure, transport = produce(backend, faults, seed=11, extend_by=37)
    assert failure is None, failure
    assert transport.committed_then_dropped > 0, transport.requests
    assert stored == [*sent, {"n": "end"}]


def test_a_hopeless_network_is_reported_and_nothing_is_doubled(backend: Backend) -> None:
    faults = Faults(drop_before=0.3, drop_after=0.3, busy=0.2)
    sent, stored, failure, _ = produce(backend, faults, seed=7, attempts=3, close=True)
    assert failure is not None
    assert "not delivered" in str(failure)
    assert stored == sent[: len(stored)]  # a prefix, no duplicates, no holes
    lost = sum(b.messages for b in failure.lost)
    assert len(stored) >= len(sent) + 1 - lost  # everything not reported lost is there


def test_json_values_are_checked_when_appended(backend: Backend) -> None:
    async def scenario() -> None:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=backend.app()))
        stream = AsyncDurableStream(URL, client=client)
        await stream.create("application/json")
        producer = IdempotentProducer(stream, "w")
        with pytest.raises(TypeError):
            await producer.append({"not": {1, 2}})  # a set is not JSON
        await producer.append({"ok": True})
        await producer.flush()
        assert [m for b in [b async for b in stream.read()] for m in b.messages or []] == [
            {"ok": True}
        ]

    asyncio.run(scenario())


def test_appended_buffers_are_copied(backend: Backend) -> None:
    async def scenario() -> None:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=backend.app()))
        stream = AsyncDurableStream("http://testserver/v1/stream/bytes", client=client)
        await stream.create("application/octet-stream")
        producer = IdempotentProducer(stream, "w", settings=ProducerSettings(linger=0.05))
        buffer = bytearray(b"first")
        await producer.append(buffer)
        buffer[:] = b"XXXXX"  # the caller reuses its buffer before the batch is sent
        await producer.flush()
        assert b"".join([b.data async for b in stream.read()]) == b"first"

    asyncio.run(scenario())


def test_empty_bytes_add_nothing_and_are_not_sent(backend: Backend) -> None:
    """The server refuses an empty append; an empty message of a byte stream carries nothing,
    so the producer drops it rather than fail a batch (or the whole run) over it."""

    async def scenario() -> None:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=backend.app()))
        stream = AsyncDurableStream("http://testserver/v1/stream/empty", client=client)
        await stream.create("text/plain")
        producer = IdempotentProducer(stream, "w")
        await producer.append(b"")
        assert await producer.flush() is None  # nothing was sent
        for piece in ("", "a", b"", "b", ""):
            await producer.append(piece)
        await producer.close("")
        assert b"".join([b.data async for b in stream.read()]) == b"ab"
        assert (await stream.head()).closed

    asyncio.run(scenario())


def test_a_producer_reusing_an_epoch_is_told_and_not_taken_for_a_duplicate(
    backend: Backend,
) -> None:
    async def scenario() -> None:
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=backend.app()))
        stream = AsyncDurableStream(URL, client=client)
        await stream.create("application/json")
        first = IdempotentProducer(stream, "same-id")
        for n in range(3):
            await first.append(n)
            await first.flush()
        second = IdempotentProducer(stream, "same-id")  # restarted without a new epoch
        await second.append("new data")
        with pytest.raises(ProducerError, match="already used"):
            await second.flush()

    asyncio.run(scenario())


class GatedTransport(httpx.AsyncBaseTransport):
    """Holds every producer append until `gate` opens."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.held = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "producer-id" in request.headers:
            self.held += 1
            await self.gate.wait()
        return await self.inner.handle_async_request(request)


def test_append_waits_while_too_much_is_buffered(backend: Backend) -> None:
    async def scenario() -> None:
        transport = GatedTransport(httpx.ASGITransport(app=backend.app()))
        stream = AsyncDurableStream(URL, client=httpx.AsyncClient(transport=transport))
        await stream.create("application/octet-stream")
        settings = ProducerSettings(linger=0.001, max_batch_bytes=40, max_buffered_bytes=100)
        producer = IdempotentProducer(stream, "w", settings=settings)
        pieces = [b"%09d," % n for n in range(11)]  # 10 bytes each
        for piece in pieces[:10]:
            await producer.append(piece)  # 100 bytes: at the limit, not over it
        blocked = asyncio.create_task(producer.append(pieces[10]))
        await asyncio.sleep(0.2)
        assert not blocked.done() and transport.held > 0  # the server has not answered
        transport.gate.set()
        await asyncio.wait_for(blocked, timeout=10)
        await producer.flush()
        assert b"".join([b.data async for b in stream.read()]) == b"".join(pieces)

    asyncio.run(scenario())
