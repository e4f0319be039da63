"""Reading ahead (`core.storage._read_ahead`) against the store: an instance that did not
write a stream reads appends held in S3 as the same batches, with the same AWS calls, as it
does without reading ahead, only with several GETs at once; and over HTTP, two instances (two
apps on one table, as two Lambda instances are) serve the same bytes while one of them seals
the stream and collects the objects the other is reading."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support import store_on

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    Collector,
    CreateSpec,
    DynamoStore,
    Payload,
    Sealer,
    SealPolicy,
    _chunks,
    _read_ahead,
)

pytestmark = pytest.mark.both_dynamodbs

JSON = "application/json"
BYTES = "application/octet-stream"


class S3Calls:
    """The S3 calls made through a client, by operation, the objects and ranges got, and the
    most calls under way at once."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.gets: Counter[tuple[str, str | None]] = Counter()
        self.under_way = self.most = 0
        self._lock = threading.Lock()

    def get(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.gets[params["Key"], params.get("Range")] += 1

    def clear(self) -> None:
        self.calls.clear()
        self.gets.clear()
        self.most = 0

    def before(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1
            self.under_way += 1
            self.most = max(self.most, self.under_way)

    def after(self, **_: Any) -> None:
        with self._lock:
            self.under_way -= 1


@pytest.fixture
def s3_calls(backend: Backend) -> Iterator[S3Calls]:
    counted = S3Calls()
    events = backend.s3.meta.events
    events.register("before-call.s3", counted.before)
    events.register("after-call.s3", counted.after)
    events.register("before-parameter-build.s3.GetObject", counted.get)
    yield counted
    events.unregister("before-call.s3", counted.before)
    events.unregister("after-call.s3", counted.after)
    events.unregister("before-parameter-build.s3.GetObject", counted.get)


def messages(append: int) -> list[bytes]:
    return [b'{"append":%d,"n":%d,"pad":"%s"}' % (append, n, b"x" * n) for n in range(12)]


def digits(append: int) -> list[bytes]:
    """1,000 one-byte messages: a separator each doubles what they cost a read's budget."""
    return [b"%d" % ((append + n) % 10) for n in range(1000)]


def written(
    writer: DynamoStore, path: str, appends: int, make: Callable[[int], list[bytes]] = messages
) -> list[int]:
    """`appends` JSON appends, each held in an S3 object of its own (the writer keeps nothing
    inline); the position after each append."""
    writer.create(path, CreateSpec(JSON))
    ends = []
    for append in range(appends):
        units = make(append)
        payload = Payload(b"".join(units), tuple(map(len, units)))
        outcome = writer.append(path, AppendIntent(JSON, True, False), payload)
        assert outcome.info is not None
        ends.append(outcome.info.tail)
    return ends


def written_bytes(writer: DynamoStore, path: str, appends: int) -> list[int]:
    writer.create(path, CreateSpec(BYTES))
    ends = []
    for append in range(appends):
        payload = Payload(bytes([append]) * (50 + append))
        outcome = writer.append(path, AppendIntent(BYTES, True, False), payload)
        assert outcome.info is not None
        ends.append(outcome.info.tail)
    return ends


Reads = dict[str, list[int]]  # the streams read, and the position after each append
BUDGETS = [1, 700, 2_500, 10_000, 1 << 20]


def written_streams(writer: DynamoStore) -> Reads:
    return {
        "ahead": written(writer, "ahead", 40),
        "tiny": written(writer, "tiny", 30, digits),
        "blobs": written_bytes(writer, "blobs", 40),
    }


def read_by_a_new_instance(
    backend: Backend, s3_calls: S3Calls, reads_of: Reads
) -> tuple[list[Any], Counter[Any], int]:
    """Every batch of reads from several starts with several budgets, by an instance new to
    the streams; the S3 calls they made (by operation, and each object and range got), and
    the most under way at once."""
    reader = store_on(backend, chunk_cache_bytes=0)
    s3_calls.clear()
    batches = []
    for path, ends in reads_of.items():
        info = reader.get(path)
        assert info is not None
        starts = [0, 1, ends[0], ends[3] - 1, ends[10], ends[-2]]
        batches += [
            reader.read(info, start, budget, whole)
            for start in starts
            for budget in BUDGETS
            for whole in (False, True)
        ]
    return batches, Counter(s3_calls.calls) + Counter(s3_calls.gets), s3_calls.most


def read_with_and_without_reading_ahead(
    backend: Backend, s3_calls: S3Calls, monkeypatch: pytest.MonkeyPatch, reads_of: Reads
) -> list[Any]:
    """The batches read, checked to be the same, with the same S3 calls (the same objects and
    ranges got), without reading ahead (where no two GETs are under way at once) as with it
    (where some are)."""
    ahead, calls_ahead, most_ahead = read_by_a_new_instance(backend, s3_calls, reads_of)
    with monkeypatch.context() as patched:
        patched.setattr(_chunks, "read_ahead", lambda chunks, *_: chunks)
        one_by_one, calls_one_by_one, most_one_by_one = read_by_a_new_instance(
            backend, s3_calls, reads_of
        )
    assert ahead == one_by_one
    assert calls_ahead == calls_one_by_one and calls_ahead["GetObject"] > 100
    assert most_one_by_one == 1 and most_ahead >= 2
    return ahead


def test_another_instance_reads_the_same_batches_with_the_same_calls_several_at_once(
    backend: Backend, s3_calls: S3Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = store_on(backend, inline_max_bytes=1)
    reads_of = written_streams(writer)
    ahead = read_with_and_without_reading_ahead(backend, s3_calls, monkeypatch, reads_of)
    whole = ahead[BUDGETS.index(1 << 20) * 2]  # "ahead" from 0, everything in one batch
    assert whole.end == reads_of["ahead"][-1]
    assert list(whole.messages or ()) == [m for a in range(40) for m in messages(a)]


def test_a_read_from_sealed_history_fetches_the_newest_appends_after_it_at_once(
    backend: Backend, s3_calls: S3Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = store_on(backend, inline_max_bytes=1)
    reads_of = written_streams(writer)
    # Sealed into segments of several pages, all but the newest appends (still chunks in S3).
    policy = SealPolicy(segment_bytes=3_000, hot_bytes=1_500, page_bytes=1_000)
    for path, ends in reads_of.items():
        Sealer(writer, policy).seal(path)
        info = writer.get(path)
        assert info is not None and 0 < info.sealed <= ends[-3]
    ahead = read_with_and_without_reading_ahead(backend, s3_calls, monkeypatch, reads_of)
    whole = ahead[BUDGETS.index(1 << 20) * 2]
    assert list(whole.messages or ()) == [m for a in range(40) for m in messages(a)]
    # The read from 0 alone: its segments' pages, then every chunk after them, several at once.
    reader = store_on(backend, chunk_cache_bytes=0)
    info = reader.get("ahead")
    assert info is not None
    s3_calls.most = 0
    assert reader.read(info, 0, 1 << 20) == whole
    assert s3_calls.most >= 2
    # Read in responses smaller than the stream, each going on from a page's start where the
    # one before stopped; from each such start, the rest of the stream in one read takes the
    # rest of the segments, and fetches every chunk after them ahead.
    fetched_ahead: list[str] = []
    pool = _read_ahead._executor()

    class Counted:
        def submit(self, fetch: Callable[[str], bytes], key: str) -> Any:
            fetched_ahead.append(key)
            return pool.submit(fetch, key)

    monkeypatch.setattr(_read_ahead, "_executor", Counted)
    for path, stop in [("ahead", 1_000), ("tiny", 5_000)]:  # "tiny": separators cost double
        reader = store_on(backend, chunk_cache_bytes=0)
        info = reader.get(path)
        assert info is not None
        every = list(reader.read(info, 0, 1 << 20).messages or ())
        tail_chunks = len([end for end in reads_of[path] if end > info.sealed])
        found: list[bytes] = []
        at = 0
        while at < info.sealed:
            fetched_ahead.clear()
            rest = reader.read(info, at, 1 << 20)
            assert list(rest.messages or ()) == every[len(found) :]
            assert len(fetched_ahead) == tail_chunks
            batch = reader.read(info, at, stop)
            found += batch.messages or ()
            assert found == every[: len(found)]
            at = batch.end
        assert len(found) > len(every) // 2


async def read_all(client: httpx.AsyncClient, url: str) -> list[Any]:
    """Every message of the stream, read from its start over HTTP, response by response."""
    found: list[Any] = []
    offset = "-1"
    while True:
        answer = await client.get(url, params={"offset": offset})
        assert answer.status_code == 200, answer.text
        found += answer.json()
        offset = answer.headers["stream-next-offset"]
        if answer.headers.get("stream-up-to-date") == "true":
            return found


def test_two_instances_serve_the_same_bytes_while_one_seals_and_collects(
    backend: Backend,
) -> None:
    writer = store_on(backend, inline_max_bytes=1)
    reader = store_on(backend, chunk_cache_bytes=0)
    ends = written(writer, "sealed-away", 60)
    values = [json.loads(m) for a in range(60) for m in messages(a)]

    def seal_and_collect(segment_bytes: int) -> None:
        Sealer(writer, SealPolicy(segment_bytes=segment_bytes, hot_bytes=0)).seal("sealed-away")
        Collector(writer, orphan_grace_seconds=0).run()

    async def scenario() -> None:
        apps = [create_app(backend.settings, store) for store in (writer, reader)]
        clients = [
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x")
            for app in apps
        ]
        url = "/v1/stream/sealed-away"
        try:
            for segment_bytes in (4_000, 8_000, 16_000, 32_000):
                # Both instances read the whole stream while the writer's seals part of it
                # away and collects the objects it replaced.
                found = await asyncio.gather(
                    read_all(clients[1], url),
                    read_all(clients[0], url),
                    asyncio.to_thread(seal_and_collect, segment_bytes),
                )
                assert found[0] == values and found[1] == values
        finally:
            for client in clients:
                await client.aclose()

    asyncio.run(scenario())
    info = reader.get("sealed-away")
    assert info is not None and info.tail == ends[-1] and info.sealed > 0
