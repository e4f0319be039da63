"""Producer requests that cannot be accepted, sent in floods to a hot stream (one that several
writers append to, so appends reserve their ranges; security review 3, F3).

A request that no pipelining producer would send (a gap past the pipeline's depth, an older
epoch, a first request of an unknown producer past seq 0) is refused after a read, without
reserving a range or voiding one; a request that a pipeline explains waits for its predecessor
on the event loop, holding no thread of the store's pool, so another stream's appends are
answered meanwhile. Two instances (two apps on one table, as two Lambda instances are) still
order a producer's requests that reached them out of order."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from support import store_on

from benchmarks.aws_calls import CallMeter
from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import DynamoStore

TEXT = {"Content-Type": "text/plain"}
ACCEPTED = {200, 204}

pytestmark = pytest.mark.both_dynamodbs


def produced(producer: str, seq: int, epoch: int = 0) -> dict[str, str]:
    return {
        **TEXT,
        "Producer-Id": producer,
        "Producer-Epoch": str(epoch),
        "Producer-Seq": str(seq),
    }


@asynccontextmanager
async def client_of(backend: Backend, store: DynamoStore | None = None) -> Any:
    app = create_app(backend.settings, store or backend.store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x", timeout=60) as client:
        yield client


async def next_offset(client: httpx.AsyncClient, url: str) -> str:
    return (await client.head(url)).headers["stream-next-offset"]


def test_requests_no_pipeline_explains_are_refused_without_a_write(backend: Backend) -> None:
    async def scenario() -> None:
        async with client_of(backend) as client:
            url = "/v1/stream/a"
            assert (await client.put(url, headers=TEXT)).status_code == 201
            for headers in (produced("evil", 0), produced("old", 0), produced("old", 0, 1)):
                answer = await client.post(url, headers=headers, content=b"e")
                assert answer.status_code in ACCEPTED
            backend.store.recent.mark_hot("a")
            before = await next_offset(client, url)
            meter = CallMeter()
            meter.attach(backend.dynamodb)
            floods = [
                *(
                    client.post(url, headers=produced("evil", 1000 + k), content=b"z")
                    for k in range(30)
                ),
                *(client.post(url, headers=produced("old", k, 0), content=b"z") for k in range(20)),
                *(
                    client.post(url, headers=produced(f"new{k}", 500), content=b"z")
                    for k in range(30)
                ),
            ]
            answers = await asyncio.gather(*floods)
            assert [a.status_code for a in answers] == [409] * 30 + [403] * 20 + [409] * 30
            assert meter.calls["UpdateItem"] == meter.calls["TransactWriteItems"] == 0
            assert meter.calls["PutItem"] == meter.calls["DeleteItem"] == 0
            assert await next_offset(client, url) == before  # nothing reserved, nothing voided
            assert answers[0].headers["producer-expected-seq"] == "1"

    asyncio.run(scenario())


def test_producer_requests_waiting_for_a_predecessor_hold_no_thread(backend: Backend) -> None:
    """100 requests that a pipeline explains (seq 2 of a producer at seq 0, seq 3 of unknown
    ones: their predecessors never come) each wait about 1.2 s for them, reserving nothing;
    meanwhile a producer append to another stream is answered. When those waits held threads
    of the store's pool (40), it was answered after all of them."""

    async def scenario() -> None:
        async with client_of(backend) as client:
            for path in ("a", "b"):
                assert (await client.put(f"/v1/stream/{path}", headers=TEXT)).status_code == 201
            answer = await client.post("/v1/stream/a", headers=produced("evil", 0), content=b"e")
            assert answer.status_code in ACCEPTED
            answer = await client.post("/v1/stream/b", headers=produced("pb", 0), content=b"x")
            assert answer.status_code in ACCEPTED
            backend.store.recent.mark_hot("a")
            before = await next_offset(client, "/v1/stream/a")
            answered: dict[str, float] = {}

            async def waiting(name: str, headers: dict[str, str]) -> int:
                answer = await client.post("/v1/stream/a", headers=headers, content=b"z")
                answered[name] = time.monotonic()
                return answer.status_code

            async def other_stream() -> int:
                await asyncio.sleep(0.05)  # once the others are waiting
                answer = await client.post("/v1/stream/b", headers=produced("pb", 1), content=b"y")
                answered["other stream"] = time.monotonic()
                return answer.status_code

            codes = await asyncio.gather(
                *(waiting(f"seq 2 #{k}", produced("evil", 2)) for k in range(80)),
                *(waiting(f"new #{k}", produced(f"new{k}", 3)) for k in range(20)),
                other_stream(),
            )
            assert codes[:-1] == [409] * 100
            assert codes[-1] in ACCEPTED
            others = sorted(at for name, at in answered.items() if name != "other stream")
            # Before at least half of them (the pool is still shared by their short reads).
            assert answered["other stream"] < others[len(others) // 2]
            assert await next_offset(client, "/v1/stream/a") == before  # nothing reserved

    asyncio.run(scenario())


def test_two_instances_order_a_producers_requests_that_reached_them_out_of_order(
    backend: Backend,
) -> None:
    """Seq 1 reaches one instance before seq 0 reaches the other: it waits (on the event loop)
    for seq 0 to be stored, and the stream holds them in order. An instance whose memory of the
    producer is far behind accepts its next request, and answers it again as a duplicate."""
    second = store_on(backend)

    async def scenario() -> None:
        async with client_of(backend) as one, client_of(backend, second) as two:
            url = "/v1/stream/p"
            assert (await one.put(url, headers=TEXT)).status_code == 201
            for store in (backend.store, second):
                store.recent.mark_hot("p")

            async def later() -> httpx.Response:
                return await two.post(url, headers=produced("x", 1), content=b"B;")

            waiting = asyncio.create_task(later())
            await asyncio.sleep(0.15)
            first = await one.post(url, headers=produced("x", 0), content=b"A;")
            assert first.status_code in ACCEPTED
            assert (await waiting).status_code in ACCEPTED
            for seq in range(2, 71):  # to the first instance only
                answer = await one.post(url, headers=produced("x", seq), content=b"c;")
                assert answer.status_code == 200
            # The second last saw seq 1 stored: 71 is past any pipeline from there, so it
            # reads the producer's state before reserving, and accepts it.
            met_elsewhere = await two.post(url, headers=produced("x", 71), content=b"D;")
            assert met_elsewhere.status_code == 200
            again = await two.post(url, headers=produced("x", 71), content=b"D;")
            assert again.status_code == 204
            assert (
                again.headers["stream-next-offset"] == met_elsewhere.headers["stream-next-offset"]
            )
            body = (await one.get(url, params={"offset": "-1"})).content
            assert body == b"A;B;" + b"c;" * 69 + b"D;"

    asyncio.run(scenario())


def test_a_request_the_stream_refuses_teaches_nothing_of_its_producer(backend: Backend) -> None:
    """A producer request refused for the stream's sake (another content type) stored nothing:
    the producer's requests that follow are still put in order here (the review of F3 found a
    refused epoch 7 remembered, after which seq 2 overtaking seq 1 was answered 409)."""

    async def scenario() -> None:
        async with client_of(backend) as client:
            url = "/v1/stream/o"
            assert (await client.put(url, headers=TEXT)).status_code == 201
            first = await client.post(url, headers=produced("p", 0), content=b"a")
            assert first.status_code in ACCEPTED
            wrong = {**produced("p", 0, epoch=7), "Content-Type": "application/json"}
            assert (await client.post(url, headers=wrong, content=b"1")).status_code == 409

            async def overtaking() -> httpx.Response:
                return await client.post(url, headers=produced("p", 2), content=b"c")

            ahead = asyncio.create_task(overtaking())
            await asyncio.sleep(0.05)
            second = await client.post(url, headers=produced("p", 1), content=b"b")
            assert second.status_code == 200 and (await ahead).status_code == 200
            assert (await client.get(url, params={"offset": "-1"})).content == b"abc"

    asyncio.run(scenario())


def test_a_closed_hot_stream_answers_a_producer_with_its_tail(backend: Backend) -> None:
    """A request read before reserving and refused because the stream is closed names the
    stream's tail, not where its producer's data ends (4, before the review of F3)."""

    async def scenario() -> None:
        async with client_of(backend) as client:
            url = "/v1/stream/c"
            assert (await client.put(url, headers=TEXT)).status_code == 201
            assert (await client.post(url, headers=produced("p", 0), content=b"abcd")).is_success
            assert (await client.post(url, headers=TEXT, content=b"efghij")).is_success
            closing = {**TEXT, "Stream-Closed": "true"}
            closed = await client.post(url, headers=closing)
            assert closed.is_success
            backend.store.recent.mark_hot("c")
            refused = await client.post(url, headers=produced("p", 100), content=b"z")
            assert refused.status_code == 409
            assert refused.headers["stream-next-offset"] == closed.headers["stream-next-offset"]

    asyncio.run(scenario())
