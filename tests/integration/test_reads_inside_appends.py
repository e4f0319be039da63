"""Reads at offsets inside an append, and responses that end between appends.

A plain offset inside an append reads from that append's start, whole (as the reference server
reads it, and as clients that compute offsets, such as the Yjs layer, need); for JSON the unit
is a message. A response takes whole appends, unless a single append is larger than the response
may be: then it is cut inside, and its offset (with the `_i` suffix) resumes at exactly that
byte. Checked on chunks, on sealed segments (whose pages record where appends end), on segments
sealed before they did, and on forks, through the store and over HTTP.
"""

from __future__ import annotations

import base64
import random
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from sealing_support import BYTES, JSON, Expected, append_units, filled_stream
from starlette.testclient import TestClient
from support import store_on

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.protocol.offsets import format_offset, parse_offset
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import (
    CreateSpec,
    DynamoStore,
    ForkRequest,
    Sealer,
    SealPolicy,
)
from durable_streams_aws.core.storage import _segments as layout
from durable_streams_aws.core.storage._chunks import ChunkStore

SMALL = SealPolicy(segment_bytes=3000, hot_bytes=0, page_bytes=400)
BUDGETS = (1, 7, 50, 300, 5000)


def instance(backend: Backend) -> DynamoStore:
    return store_on(backend, inline_max_bytes=backend.settings.inline_max_bytes)


def unit_start(expected: Expected, position: int) -> int:
    return max(b for b in expected.boundaries() if b <= position)


def check_batch(expected: Expected, batch: Any, budget: int) -> None:
    """The batch holds the stream's bytes at its positions, and ends between appends unless
    it is one append (or part of one) larger than the budget."""
    bounds = set(expected.boundaries())
    if expected.json:
        assert batch.messages is not None and batch.start in bounds and batch.end in bounds
        index = expected.boundaries().index(batch.start)
        assert list(batch.messages) == expected.units[index : index + len(batch.messages)]
        return
    offset = batch.start - expected.origin
    assert batch.data == expected.data()[offset : offset + batch.end - batch.start]
    assert set(batch.ends) <= bounds
    if batch.inside:
        assert batch.end - batch.start <= budget
        assert not any(batch.start < b < batch.end for b in bounds), "a cut across appends"
    else:
        assert batch.end in bounds


def check_reads(store: DynamoStore, path: str, expected: Expected, seed: int) -> None:
    """From positions anywhere (plain offsets), at several budgets: the first batch starts at
    the append holding the position; following the offsets each batch names reads the rest of
    the stream exactly once."""
    info = store.get(path)
    assert info is not None and info.tail == expected.tail
    rng = random.Random(seed)
    for _ in range(40):
        start = rng.randrange(expected.origin, expected.tail)
        budget = rng.choice(BUDGETS)
        first = store.read(info, start, budget, whole=True)
        assert first.start == unit_start(expected, start), f"from {start} at {budget}"
        if budget < 50:  # followed to the end below only at budgets that take few reads
            check_batch(expected, first, budget)
            continue
        collected: list[bytes] = []
        batch, reads = first, 0
        while True:
            check_batch(expected, batch, budget)
            collected.extend(batch.messages if expected.json else [batch.data])
            if batch.end >= info.tail:
                break
            assert batch.end > batch.start, "no progress"
            # The offset a response names: plain between appends, exact inside one.
            token = format_offset(batch.end, batch.inside)
            named = parse_offset(token)
            batch = store.read(info, named.at, budget, whole=not named.exact)
            assert batch.start == named.at
            reads += 1
            assert reads < 10_000
        skipped = first.start - expected.origin
        if expected.json:
            index = expected.boundaries().index(first.start)
            assert collected == expected.units[index:]
        else:
            assert b"".join(collected) == expected.data()[skipped:]


def check_exact_reads(store: DynamoStore, path: str, expected: Expected, seed: int) -> None:
    """An offset cut inside an append reads from exactly its byte."""
    info = store.get(path)
    assert info is not None
    rng = random.Random(seed)
    for _ in range(15):
        start = rng.randrange(expected.origin, expected.tail)
        batch = store.read(info, start, rng.choice(BUDGETS))
        assert batch.start == start
        offset = start - expected.origin
        assert batch.data == expected.data()[offset : offset + len(batch.data)]


@pytest.mark.parametrize("content_type", [BYTES, JSON])
def test_reads_inside_appends_before_and_after_sealing(backend: Backend, content_type: str) -> None:
    store = instance(backend)
    expected = filled_stream(store, "s", content_type, appends=60, seed=3)
    check_reads(store, "s", expected, seed=1)
    report = Sealer(store, SMALL).seal("s")
    assert report.segments_written >= 2
    check_reads(store, "s", expected, seed=2)
    if content_type == BYTES:
        check_exact_reads(store, "s", expected, seed=3)
    # A fresh instance knows nothing of the segments: it learns them from the table.
    check_reads(instance(backend), "s", expected, seed=4)


def test_appends_larger_than_a_page_are_pages_of_their_own(backend: Backend) -> None:
    store = instance(backend)
    store.create("big", CreateSpec(BYTES))
    expected = Expected(BYTES)
    rng = random.Random(5)
    for size in (10, 900, 3, 1500, 20, 401, 399):
        append_units(store, "big", expected, [rng.randbytes(size)])
    Sealer(store, SMALL).seal("big")
    check_reads(store, "big", expected, seed=6)
    check_exact_reads(store, "big", expected, seed=7)


def test_segments_sealed_before_appends_were_recorded_read_as_before(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages without a header (the earlier layout) do not say where appends began: a position
    inside them is read from exactly there (by an instance that does not remember the chunks
    they replaced), and they seal again together with newer chunks."""
    store = instance(backend)
    expected = filled_stream(store, "old", BYTES, appends=40, seed=8)
    with monkeypatch.context() as patch:
        original = ChunkStore.pieces

        def unrecorded(self: ChunkStore, chunk: Any, json_mode: bool) -> list[layout.Piece]:
            return [layout.Piece(piece.data) for piece in original(self, chunk, json_mode)]

        patch.setattr(ChunkStore, "pieces", unrecorded)
        Sealer(store, SealPolicy(segment_bytes=1500, hot_bytes=0, page_bytes=400)).seal("old")
    # Read by an instance that never met the chunks, as such segments are met: this one
    # remembers the chunks it wrote, which do say where their appends began.
    store = instance(backend)
    info = store.get("old")
    assert info is not None
    for start in range(0, expected.tail, 97):
        batch = store.read(info, start, 300, whole=True)
        assert batch.start == start and not batch.inside
        assert batch.data == expected.data()[start : batch.end]
    rng = random.Random(9)
    for _ in range(10):
        append_units(store, "old", expected, [rng.randbytes(rng.choice([5, 60, 250]))])
    # Sealed again: old pages (merged into larger segments) and new ones side by side.
    Sealer(store, SealPolicy(segment_bytes=6000, hot_bytes=0, page_bytes=400)).seal("old")
    info = store.get("old")
    assert info is not None and info.tail == expected.tail
    position = 0
    collected = b""
    while position < info.tail:
        batch = store.read(info, position, 250)
        assert batch.start == position and batch.end > position
        collected += batch.data
        position = batch.end
    assert collected == expected.data()


def test_a_fork_reads_inside_appends_on_both_sides_of_its_fork_point(backend: Backend) -> None:
    store = instance(backend)
    source = filled_stream(store, "src", BYTES, appends=30, seed=10)
    boundaries = source.boundaries()
    point = boundaries[len(boundaries) // 2] + 2  # inside an append: the fork cuts it
    store.create("fork", CreateSpec(BYTES, fork=ForkRequest("src", point)))
    fork = Expected(BYTES, units=[*source.units])
    # The fork holds the source's bytes up to the point: its last inherited unit is cut there.
    kept, position = [], 0
    for unit in source.units:
        if position + len(unit) <= point:
            kept.append(unit)
        elif position < point:
            kept.append(unit[: point - position])
        position += len(unit)
    fork.units = kept
    rng = random.Random(11)
    for _ in range(8):
        append_units(store, "fork", fork, [rng.randbytes(rng.choice([4, 70, 300]))])
    check_reads(store, "fork", fork, seed=12)
    Sealer(store, SMALL).seal("src")
    Sealer(store, SMALL).seal("fork")
    check_reads(store, "fork", fork, seed=13)


# ---------------------------------------------------------------- over HTTP


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    settings = backend.settings.model_copy(
        update={"max_read_bytes": 64, "sse_lifetime": 0.3, "long_poll_timeout": 0.3}
    )
    with TestClient(create_app(settings, backend.store)) as test_client:
        yield test_client


def append(client: TestClient, url: str, body: bytes, content_type: str) -> str:
    answer = client.post(url, content=body, headers={"Content-Type": content_type})
    assert answer.status_code == 204, answer.text
    return str(answer.headers["stream-next-offset"])


def plus_one(token: str) -> str:
    """What the Yjs layer's compactor does to an offset: its last part, incremented."""
    head, last = token.rsplit("_", 1)
    return f"{head}_{int(last) + 1:0{len(last)}d}"


@pytest.mark.parametrize("live", [None, "long-poll", "sse"])
def test_an_offset_computed_by_a_client_reads_the_append_it_falls_in_whole(
    client: TestClient, live: str | None
) -> None:
    url = "/v1/stream/frames"
    binary = "application/octet-stream"
    client.put(url, headers={"Content-Type": binary})
    snapshot = append(client, url, b"\x05hello", binary)
    append(client, url, b"\x05world", binary)
    append(client, url, b"\x02!!", binary)
    params = {"offset": plus_one(snapshot)}
    if live:
        params["live"] = live
    answer = client.get(url, params=params)
    assert answer.status_code == 200
    if live == "sse":
        data = [line.removeprefix("data:") for line in answer.text.splitlines()]
        assert base64.b64decode(data[1].strip()) == b"\x05world\x02!!"
    else:
        assert answer.content == b"\x05world\x02!!"


def test_json_offsets_inside_a_message_read_that_message(client: TestClient) -> None:
    url = "/v1/stream/json"
    client.put(url, headers={"Content-Type": "application/json"})
    first = append(client, url, b'[{"a":1},{"b":2}]', "application/json")
    append(client, url, b'{"c":3}', "application/json")
    answer = client.get(url, params={"offset": plus_one(first)})
    assert answer.json() == [{"c": 3}]
    answer = client.get(url, params={"offset": plus_one(format_offset(0))})
    assert answer.json() == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_a_response_cut_inside_an_append_resumes_exactly(client: TestClient) -> None:
    url = "/v1/stream/large"
    client.put(url, headers={"Content-Type": "text/plain"})
    start = append(client, url, b"x" * 10, "text/plain")
    append(client, url, bytes(range(97, 123)) * 4, "text/plain")  # 104 bytes, over 64
    append(client, url, b"tail", "text/plain")
    data, offset, responses = b"", start, 0
    while True:
        answer = client.get(url, params={"offset": offset})
        data += answer.content
        responses += 1
        offset = answer.headers["stream-next-offset"]
        if answer.headers.get("stream-up-to-date"):
            break
        assert responses < 10
    assert data == bytes(range(97, 123)) * 4 + b"tail"
    assert responses == 2  # 64 bytes cut inside the large append, then the rest whole
    # The offset of the cut names exactly that byte; the same position without the suffix
    # names the append that holds it.
    cut = client.get(url, params={"offset": start}).headers["stream-next-offset"]
    assert cut.endswith("_i")
    exact = client.get(url, params={"offset": cut})
    assert exact.content.startswith((bytes(range(97, 123)) * 4)[64:])
    plain = client.get(url, params={"offset": cut.removesuffix("_i")})
    assert plain.content.startswith(bytes(range(97, 123)))
    assert plain.headers["etag"] != exact.headers["etag"]


def test_a_read_from_the_start_returns_a_whole_stream_in_one_response(
    client: TestClient,
) -> None:
    url = "/v1/stream/one-shot"
    client.put(url, headers={"Content-Type": "application/octet-stream"})
    rng = random.Random(14)
    parts = [rng.randbytes(rng.choice([10, 100, 1000])) for _ in range(300)]
    for part in parts:
        append(client, url, part, "application/octet-stream")
    answer = client.get(url, params={"offset": "-1"})
    assert answer.content == b"".join(parts)
    assert answer.headers["stream-up-to-date"] == "true"
    # From anywhere else, at most max_read_bytes, in whole appends.
    middle = client.get(url, params={"offset": format_offset(len(parts[0]))})
    assert 0 < len(middle.content) <= 64 or len(middle.content) == len(parts[1])


@pytest.mark.parametrize("live", [None, "long-poll"])
def test_a_plain_offset_past_the_tail_reads_from_the_tail(
    client: TestClient, live: str | None
) -> None:
    """The Yjs layer asks for its snapshot's offset plus one when nothing was written after the
    snapshot: the append it lies in is still to come. An offset cut inside an append that does
    not exist is refused."""
    url = "/v1/stream/after"
    binary = "application/octet-stream"
    client.put(url, headers={"Content-Type": binary})
    tail = append(client, url, b"\x03abc", binary)
    params = {"offset": plus_one(tail)}
    if live:
        params["live"] = live
    answer = client.get(url, params=params)
    assert answer.status_code == (204 if live else 200) and answer.content == b""
    assert answer.headers["stream-next-offset"] == tail
    assert answer.headers["stream-up-to-date"] == "true"
    refused = client.get(url, params={"offset": plus_one(tail) + "_i"})
    assert refused.status_code == 400


def test_a_sealed_byte_segment_starts_with_exactly_the_streams_bytes(backend: Backend) -> None:
    """Readers of earlier versions read a segment of a stream that is not JSON as the stream's
    bytes from the object's start: the appends' lengths follow all of them, in a trailer, and
    a directory entry flags its pages (which earlier versions never look at for such streams)."""
    store = instance(backend)
    expected = filled_stream(store, "layout", BYTES, appends=40, seed=15)
    Sealer(store, SMALL).seal("layout")
    info = store.get("layout")
    assert info is not None
    stored = instance(backend).chunks  # the items as stored, not this writer's memory of them
    whole = info.segments()[0]
    sealed = [c for c in stored._chunks(whole, 0, reach=whole.end) if c.sealed]
    assert sealed
    recorded: list[int] = []
    for held in sealed:
        assert held.s3_key is not None and held.pages is not None
        body = backend.s3.get_object(Bucket=backend.settings.bucket, Key=held.s3_key)
        data = body["Body"].read()
        size = held.end - held.start
        assert data[:size] == expected.data()[held.start : held.end]
        assert all(page.lengths_at is not None for page in held.pages)
        trailer = data[size:]
        recorded.extend(struct.unpack(f"<{len(trailer) // 4}I", trailer))
    assert recorded == [len(unit) for unit in expected.units][: len(recorded)]
