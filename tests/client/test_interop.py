"""Interoperability with the upstream clients, both directions, against `dsaws serve`: the npm
`@durable-streams/client` (plain appends, its IdempotentProducer, catch-up, long-poll and SSE
reads) and the PyPI `durable-streams` client write what our client reads, and read what our
client and our idempotent producer wrote, byte for byte and message for message."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from collections.abc import Iterator

import durable_streams as upstream
import pytest
from support import ServerProcess

from durable_streams_aws.client import (
    Batch,
    DurableStream,
    Live,
    Offset,
    ProducerSettings,
    SyncIdempotentProducer,
)
from interop import run_ts_client, ts_client_command

pytestmark = pytest.mark.integration

JSON_VALUES: list[object] = [{"role": "user", "text": "héllo"}, [1, 2.5, None], "plain", 7, True]
TEXT = "first line\r\nsecond line\n  indented ünïcode\r"
BINARY = bytes(range(256)) + b"\x00\r\n\xff"
QUICK = ProducerSettings(linger=0.001)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with ServerProcess("--long-poll-timeout", "1") as server:
        yield f"{server.base_url}/v1/stream"


def read_everything(url: str, live: str | None) -> tuple[list[object] | bytes, bool]:
    """Our client's read from the start: the messages (JSON) or bytes, and whether it ended at
    the stream's close."""
    with DurableStream(url) as stream:
        batches = list(stream.read(Offset.BEGINNING, live=live))  # type: ignore[arg-type]
    if batches and batches[-1].messages is not None:
        return [m for batch in batches for m in batch.messages or []], batches[-1].closed
    return b"".join(batch.data for batch in batches), bool(batches) and batches[-1].closed


def ts_payloads(content_type: str) -> list[dict[str, object]]:
    if content_type == "application/json":
        return [{"json": value} for value in JSON_VALUES]
    if content_type == "text/plain":
        return [{"text": TEXT[:12]}, {"text": TEXT[12:]}]
    return [{"base64": base64.b64encode(part).decode()} for part in (BINARY[:100], BINARY[100:])]


def expected(content_type: str) -> list[object] | bytes:
    if content_type == "application/json":
        return JSON_VALUES
    return TEXT.encode() if content_type == "text/plain" else BINARY


CONTENT_TYPES = ["application/json", "text/plain", "application/octet-stream"]


# ---------------------------------------------------------------- upstream writes, we read


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("live", [None, "long-poll", "auto"])
def test_what_the_typescript_client_wrote_we_read(
    base: str, content_type: str, live: str | None
) -> None:
    url = f"{base}/from-ts/{content_type.replace('/', '-')}/{live}"
    payloads = json.dumps(ts_payloads(content_type))
    run_ts_client("write", url, content_type, payloads, "--close")
    data, closed = read_everything(url, live)
    assert data == expected(content_type) and closed


def test_what_the_typescript_producer_wrote_we_read_exactly_once(base: str) -> None:
    url = f"{base}/from-ts-producer"
    with DurableStream(url) as stream:
        stream.create("application/json")
    done = run_ts_client("produce", url, "ts-writer", "2000", "60", "--json", "--close")
    assert done["errors"] == [] and done["messages"] == 2000
    messages, closed = read_everything(url, "auto")
    assert closed and [m["n"] for m in messages] == list(range(2000))  # type: ignore[index]


def test_what_the_pypi_client_wrote_we_read(base: str) -> None:
    json_url, text_url = f"{base}/from-pypi/json", f"{base}/from-pypi/text"
    with upstream.DurableStream.create(json_url, content_type="application/json") as handle:
        for value in JSON_VALUES:
            handle.append(value)
    with upstream.DurableStream.create(text_url, content_type="text/plain") as handle:
        handle.append(TEXT[:12])
        handle.append(TEXT[12:])
    with DurableStream(json_url) as stream:
        stream.close()
    assert read_everything(json_url, "long-poll") == (JSON_VALUES, True)
    assert read_everything(text_url, None) == (TEXT.encode(), False)


# ---------------------------------------------------------------- we write, upstream reads


def write_ours(url: str, content_type: str) -> None:
    """Plain appends and our idempotent producer, then a close with a final message."""
    with DurableStream(url) as stream:
        stream.create(content_type)
        if content_type == "application/json":
            stream.append(JSON_VALUES[:2])
            producer = SyncIdempotentProducer(url, "ours", settings=QUICK)
            for value in JSON_VALUES[2:-1]:
                producer.append(value)
            producer.close(JSON_VALUES[-1])
        else:
            whole = expected(content_type)
            assert isinstance(whole, bytes)
            third = len(whole) // 3
            stream.append(whole[:third], content_type=content_type)
            producer = SyncIdempotentProducer(url, "ours", settings=QUICK)
            producer.append(whole[third : 2 * third])
            producer.close(whole[2 * third :])


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("live", ["false", "long-poll", "sse"])
def test_what_we_wrote_the_typescript_client_reads(base: str, content_type: str, live: str) -> None:
    url = f"{base}/to-ts/{content_type.replace('/', '-')}/{live}"
    write_ours(url, content_type)
    read = run_ts_client("read", url, live)
    if content_type == "application/json":
        assert read["json"] == JSON_VALUES
    else:  # the stream is closed: the upstream reader catches up without SSE, CRs and all
        assert base64.b64decode(read["base64"]) == expected(content_type)
    assert read["closed"] is True


def test_what_we_wrote_the_pypi_client_reads(base: str) -> None:
    json_url, binary_url = f"{base}/to-pypi/json", f"{base}/to-pypi/binary"
    write_ours(json_url, "application/json")
    write_ours(binary_url, "application/octet-stream")
    with upstream.stream(json_url, live=False) as response:
        assert response.read_json() == JSON_VALUES
    with upstream.stream(binary_url, live=False) as response:
        assert response.read_bytes() == BINARY


@pytest.mark.parametrize("live", ["long-poll", "sse"])
def test_a_pypi_reader_follows_our_producer_live(base: str, live: str) -> None:
    """PyPI durable-streams 0.1.0 predates stream closure (a live read of a closed stream polls
    for ever) and starts live reads without the offset the protocol requires (our server
    answers 400), so its reader is given the offset and stops once it has every message."""
    url = f"{base}/pypi-follows-ours/{live}"
    with DurableStream(url) as stream:
        stream.create("application/json")
    sent = [{"n": n, "text": "ünïcode " * (n % 5)} for n in range(200)]
    received: list[object] = []

    def follow() -> None:
        with upstream.stream(url, live=live, offset="-1") as response:  # type: ignore[arg-type]
            for item in response.iter_json():
                received.append(item)
                if len(received) == len(sent):
                    return

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    with SyncIdempotentProducer(url, "live-writer", settings=QUICK) as producer:
        for n, message in enumerate(sent):
            producer.append(message)
            if n % 50 == 0:
                producer.flush()
        producer.flush()
    reader.join(timeout=60)
    assert not reader.is_alive() and received == sent


@pytest.mark.parametrize("live", ["long-poll", "sse"])
def test_a_typescript_reader_follows_our_producer_live_to_the_close(base: str, live: str) -> None:
    """The upstream reader has caught up (it says "ready") before our producer writes, in
    stages; it must end exactly at our close, with every message once, in order."""
    url = f"{base}/ts-follows-ours/{live}"
    with DurableStream(url) as stream:
        stream.create("application/json")
    with subprocess.Popen(
        [*ts_client_command(), "read", url, live],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as reader:
        assert reader.stderr is not None and reader.stderr.readline() == "ready\n"
        producer = SyncIdempotentProducer(url, "live-writer")
        for n in range(300):
            producer.append({"n": n})
            if n % 100 == 99:
                producer.flush()
                time.sleep(0.3)  # the reader is waiting at the tail again
        producer.close({"n": "end"})
        out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    read = json.loads(out)
    assert read["json"] == [*({"n": n} for n in range(300)), {"n": "end"}] and read["closed"]


@pytest.mark.parametrize("live", ["long-poll", "sse", "auto"])
def test_our_reader_follows_the_typescript_producer_live_to_the_close(
    base: str, live: Live
) -> None:
    """Our reader is following before the upstream producer writes and closes the stream (an
    SSE or automatic read hands over an empty up-to-date batch first; a long-poll of the
    empty stream just waits)."""
    url = f"{base}/ours-follows-ts/{live}"
    with DurableStream(url) as stream:
        stream.create("application/json")
    got: list[Batch] = []
    following = threading.Event()

    def follow() -> None:
        with DurableStream(url) as stream:
            for batch in stream.read(Offset.BEGINNING, live=live):
                following.set()
                got.append(batch)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    if live == "long-poll":
        time.sleep(1.5)  # nothing to hand over yet: the reader waits in a long-poll
    else:
        assert following.wait(timeout=10)
    done = run_ts_client("produce", url, "ts-live", "500", "40", "--json", "--close")
    assert done["errors"] == []
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert [m["n"] for b in got for m in b.messages or []] == list(range(500))  # type: ignore[index]
    assert got[-1].closed and not any(b.closed for b in got[:-1])
