"""50 concurrent writers against `dsaws serve` on the locked emulator.

Plain writers, sequential producers (which also retry, as after a lost response) and producers
that pipeline five requests at a time all append to three JSON streams at once. A full read
afterwards must show every message exactly once, each writer's messages in the order it wrote
them, and the offsets the server handed out strictly increasing per stream. A lost update, a
doubled retry or a reordered producer batch fails it.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Iterator

import httpx
import pytest
from support import ServerProcess

STREAMS = ["c0", "c1", "c2"]
PLAIN_WRITERS = 25
SEQUENTIAL_PRODUCERS = 15
PIPELINED_PRODUCERS = 10
IN_FLIGHT = 5
APPENDS_EACH = 8


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("--long-poll-timeout", "1") as running:
        yield running


def _message(writer: str, index: int) -> bytes:
    return json.dumps({"writer": writer, "i": index}).encode()


async def _plain_writer(
    client: httpx.AsyncClient, url: str, name: str, offsets: list[tuple[str, str]]
) -> None:
    for index in range(APPENDS_EACH):
        response = await client.post(
            url, content=_message(name, index), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 204, response.text
        offsets.append((name, response.headers["Stream-Next-Offset"]))


async def _producer_append(
    client: httpx.AsyncClient, url: str, name: str, seq: int, offsets: list[tuple[str, str]]
) -> None:
    """Send one producer batch until it is acknowledged, retrying out-of-order gaps."""
    headers = {
        "Content-Type": "application/json",
        "Producer-Id": name,
        "Producer-Epoch": "0",
        "Producer-Seq": str(seq),
    }
    for _ in range(400):
        response = await client.post(url, content=_message(name, seq), headers=headers)
        if response.status_code == 200:
            assert response.headers["Producer-Seq"] == str(seq)
            offsets.append((name, response.headers["Stream-Next-Offset"]))
            return
        if response.status_code == 204:
            return  # an earlier attempt of ours already landed
        assert response.status_code == 409, response.text
        assert int(response.headers["Producer-Expected-Seq"]) < seq  # only ever a gap
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} seq {seq} never committed")


async def _sequential_producer(
    client: httpx.AsyncClient, url: str, name: str, offsets: list[tuple[str, str]]
) -> None:
    for seq in range(APPENDS_EACH):
        await _producer_append(client, url, name, seq, offsets)
        if random.random() < 0.3:  # a retry after a lost response must be a duplicate
            headers = {
                "Content-Type": "application/json",
                "Producer-Id": name,
                "Producer-Epoch": "0",
                "Producer-Seq": str(seq),
            }
            retry = await client.post(url, content=_message(name, seq), headers=headers)
            assert retry.status_code == 204, retry.text


async def _pipelined_producer(
    client: httpx.AsyncClient, url: str, name: str, offsets: list[tuple[str, str]]
) -> None:
    window = asyncio.Semaphore(IN_FLIGHT)

    async def send(seq: int) -> None:
        async with window:
            await _producer_append(client, url, name, seq, offsets)

    await asyncio.gather(*(send(seq) for seq in range(APPENDS_EACH)))


async def _read_everything(client: httpx.AsyncClient, url: str) -> list[dict[str, object]]:
    messages: list[dict[str, object]] = []
    offset = "-1"
    while True:
        response = await client.get(url, params={"offset": offset})
        assert response.status_code == 200
        messages.extend(response.json())
        offset = response.headers["Stream-Next-Offset"]
        if response.headers.get("Stream-Up-To-Date") == "true":
            return messages


async def _run(base_url: str) -> None:
    limits = httpx.Limits(max_connections=100)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        urls = {name: f"/v1/stream/{name}" for name in STREAMS}
        for url in urls.values():
            created = await client.put(url, headers={"Content-Type": "application/json"})
            assert created.status_code == 201
        offsets: dict[str, list[tuple[str, str]]] = defaultdict(list)
        writers = []
        kinds = (
            [("plain", _plain_writer)] * PLAIN_WRITERS
            + [("seq", _sequential_producer)] * SEQUENTIAL_PRODUCERS
            + [("pipe", _pipelined_producer)] * PIPELINED_PRODUCERS
        )
        expected: dict[str, list[str]] = defaultdict(list)
        for number, (kind, writer) in enumerate(kinds):
            stream = STREAMS[number % len(STREAMS)]
            name = f"{kind}-{number}"
            expected[stream].append(name)
            writers.append(writer(client, urls[stream], name, offsets[stream]))
        assert len(writers) == 50
        await asyncio.gather(*writers)

        for stream in STREAMS:
            messages = await _read_everything(client, urls[stream])
            seen: dict[str, list[int]] = defaultdict(list)
            for message in messages:
                seen[str(message["writer"])].append(int(message["i"]))  # type: ignore[call-overload]
            assert sorted(seen) == sorted(expected[stream])
            for name, indices in seen.items():
                assert indices == list(range(APPENDS_EACH)), f"{name} on {stream}: {indices}"
            handed_out = [offset for _, offset in offsets[stream]]
            assert len(handed_out) == len(set(handed_out)) == len(messages)
            for name in expected[stream]:
                if not name.startswith("pipe"):  # one request at a time: offsets must climb
                    own = [offset for writer, offset in offsets[stream] if writer == name]
                    assert own == sorted(own), f"{name} saw offsets go backwards"
            # Read order agrees with commit order: sorting the acknowledged offsets lists
            # the writers in the order their messages come back.
            by_offset = [writer for writer, _ in sorted(offsets[stream], key=lambda w: w[1])]
            assert by_offset == [str(m["writer"]) for m in messages]
            tail = (await client.head(urls[stream])).headers["Stream-Next-Offset"]
            assert max(handed_out) == tail


@pytest.mark.timeout(300)
def test_fifty_concurrent_writers_lose_and_double_nothing(server: ServerProcess) -> None:
    random.seed(7)
    asyncio.run(_run(server.base_url))
