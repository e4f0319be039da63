"""The `until` read extension: a catch-up read bounded at an offset returns exactly the data
before it, page by page, and the same bytes (and ETag) whatever is appended later. Reads without
it are unchanged (the conformance suite checks those)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.protocol.offsets import format_offset, parse_offset
from durable_streams_aws.core.runtime import Backend

TEXT = {"Content-Type": "text/plain"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    settings = backend.settings.model_copy(
        update={"max_read_bytes": 4, "max_bounded_read_bytes": 8}
    )
    with TestClient(create_app(settings, backend.store)) as test_client:
        yield test_client


def append(client: TestClient, url: str, body: bytes, headers: dict[str, str]) -> str:
    answer = client.post(url, content=body, headers=headers)
    assert answer.status_code == 204
    return str(answer.headers["stream-next-offset"])


def read_range(client: TestClient, url: str, start: str, until: str) -> tuple[bytes, int]:
    """Page from `start` to `until`; the bytes and how many requests it took."""
    data, offset, pages = b"", start, 0
    while offset != until:
        answer = client.get(url, params={"offset": offset, "until": until})
        assert answer.status_code == 200, answer.text
        pages += 1
        data += answer.content
        assert answer.headers["stream-next-offset"] != offset, "a page that moved nowhere"
        offset = answer.headers["stream-next-offset"]
    return data, pages


def test_a_bounded_read_stops_at_the_bound_page_by_page(client: TestClient) -> None:
    url = "/v1/stream/bytes"
    client.put(url, headers=TEXT)
    first = append(client, url, b"abcdef", TEXT)
    second = append(client, url, b"ghijkl", TEXT)
    third = append(client, url, b"mn", TEXT)
    fourth = append(client, url, b"opqrstuvwx", TEXT)
    # A bounded read takes 8 bytes a page from wherever it starts (the start included), in
    # whole appends but for a first one larger than that, which is cut inside; the offset of
    # the cut says so (it resumes at exactly that byte).
    assert read_range(client, url, "-1", third) == (b"abcdefghijklmn", 2)  # "abcdef", ...
    assert read_range(client, url, first, third) == (b"ghijklmn", 1)
    assert read_range(client, url, "-1", second) == (b"abcdefghijkl", 2)
    answer = client.get(url, params={"offset": third, "until": fourth})
    assert answer.content == b"opqrstuv"
    assert answer.headers["stream-next-offset"].endswith("_i")
    answer = client.get(url, params={"offset": "-1", "until": first})
    assert "stream-up-to-date" not in answer.headers  # the stream goes on past the bound
    # Unbounded, a read from the start fills a whole response, any other takes 4 bytes.
    assert client.get(url, params={"offset": "-1"}).content == b"abcdefghijklmnopqrstuvwx"
    assert client.get(url, params={"offset": first}).content == b"ghij"


FRONT_DOOR = 16 * 1024


@pytest.mark.parametrize(
    ("limits", "asked"),
    [
        # Three quarters of what the front door carries: room for base64 and escapes.
        ({"max_read_bytes": 4, "max_bounded_read_bytes": 1 << 30}, FRONT_DOOR * 3 // 4),
        ({"max_read_bytes": 4, "max_bounded_read_bytes": 5_000}, 5_000),
        ({"max_read_bytes": 6_000, "max_bounded_read_bytes": 5_000}, 6_000),  # never less
    ],
)
def test_what_a_bounded_read_asks_the_store_for(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, limits: dict[str, int], asked: int
) -> None:
    settings = backend.settings.model_copy(update={**limits, "max_response_bytes": FRONT_DOOR})
    asks: list[int] = []
    read = backend.store.read

    def spied(info: Any, start: int, max_bytes: int, whole: bool = False) -> Any:
        asks.append(max_bytes)
        return read(info, start, max_bytes, whole)

    with TestClient(create_app(settings, backend.store)) as client:
        url = "/v1/stream/large"
        client.put(url, headers=TEXT)
        tail = append(client, url, b"x" * 40_000, TEXT)
        monkeypatch.setattr(backend.store, "read", spied)
        data, pages = read_range(client, url, "-1", tail)
        assert data == b"x" * 40_000
        assert pages == -(-40_000 // asked) and asks[0] == asked
        asks.clear()
        offset = format_offset(20_000)  # from elsewhere alike
        assert client.get(url, params={"offset": offset, "until": tail}).status_code == 200
        assert asks == [asked]


def test_the_same_range_reads_the_same_after_more_appends(client: TestClient) -> None:
    url = "/v1/stream/replayed"
    client.put(url, headers=TEXT)
    bound = append(client, url, b"abc", TEXT)
    before = client.get(url, params={"offset": "-1", "until": bound})
    assert before.headers["stream-up-to-date"] == "true"  # the bound is the tail, for now
    append(client, url, b"def", TEXT)
    after = client.get(url, params={"offset": "-1", "until": bound})
    assert after.content == before.content == b"abc"
    assert after.headers["stream-next-offset"] == bound
    unbounded = client.get(url, params={"offset": "-1"})
    assert unbounded.headers["etag"] != after.headers["etag"]


def test_empty_and_clamped_ranges(client: TestClient) -> None:
    url = "/v1/stream/edges"
    client.put(url, headers=TEXT)
    tail = append(client, url, b"xy", TEXT)
    empty = client.get(url, params={"offset": tail, "until": tail})
    assert empty.status_code == 200 and empty.content == b""
    assert empty.headers["stream-next-offset"] == tail
    past = f"{0:016d}_{999:016d}"  # past the tail: the read ends at the tail, and says so
    clamped = client.get(url, params={"offset": "-1", "until": past})
    assert clamped.content == b"xy" and clamped.headers["stream-up-to-date"] == "true"
    assert clamped.headers["stream-next-offset"] == tail


def test_json_ranges_hold_whole_messages(client: TestClient) -> None:
    url = "/v1/stream/json"
    client.put(url, headers=JSON)
    one = append(client, url, b'[{"n":1}]', JSON)
    two = append(client, url, b'[{"n":2},{"n":3}]', JSON)
    assert client.get(url, params={"offset": "-1", "until": one}).json() == [{"n": 1}]
    assert client.get(url, params={"offset": one, "until": two}).json()[0] == {"n": 2}
    position = int(one.split("_")[1]) + 1  # inside the second message
    inside = client.get(url, params={"offset": one, "until": f"{0:016d}_{position:016d}"})
    assert inside.status_code == 400 and "message boundary" in inside.text


@pytest.mark.parametrize(
    "query",
    [
        "offset=-1&until=abc",
        "offset=-1&until=-1",
        "offset=now&until=0000000000000000_0000000000000001",
        "offset=-1&live=long-poll&until=0000000000000000_0000000000000001",
        "offset=-1&live=sse&until=0000000000000000_0000000000000001",
        "offset=-1&until=0000000000000000_0000000000000001&until=0000000000000000_0000000000000001",
        "offset=0000000000000000_0000000000000002&until=0000000000000000_0000000000000001",
        "offset=-1&%75ntil=0000000000000000_0000000000000001",  # the cache would not see it
    ],
)
def test_bad_bounds_are_refused(client: TestClient, query: str) -> None:
    url = "/v1/stream/refusing"
    client.put(url, headers=TEXT)
    append(client, url, b"abc", TEXT)
    answer = client.get(f"{url}?{query}")
    assert answer.status_code == 400 and len(answer.content) < 300


def test_an_empty_range_at_an_exact_offset_names_it_exactly(client: TestClient) -> None:
    """A client whose bound is an offset cut inside an append reaches it: the empty read there
    hands the same exact offset back (a plain one would read the append from its start)."""
    url = "/v1/stream/exact-bound"
    client.put(url, headers=TEXT)
    start = append(client, url, b"ab", TEXT)
    append(client, url, b"0123456789", TEXT)
    cut = client.get(url, params={"offset": start}).headers["stream-next-offset"]
    assert cut.endswith("_i")
    answer = client.get(url, params={"offset": cut, "until": cut})
    assert answer.content == b"" and answer.headers["stream-next-offset"] == cut


def test_a_json_range_that_fits_a_response_is_read_in_one(backend: Backend) -> None:
    """The bound counts data bytes, a JSON body its separators too: a range of many small
    messages, read from the middle of a stream (where the bound, not the response's size,
    limits the read), comes back whole in one request rather than all but its last
    messages."""
    settings = backend.settings.model_copy(update={"max_read_bytes": 4096})
    with TestClient(create_app(settings, backend.store)) as client:
        url = "/v1/stream/json-range"
        client.put(url, headers=JSON)
        start = append(client, url, b"[0]", JSON)
        end = append(client, url, b"[" + b",".join(b"%d" % n for n in range(100)) + b"]", JSON)
        append(client, url, b"[1000]", JSON)
        answer = client.get(url, params={"offset": start, "until": end})
        assert answer.headers["stream-next-offset"] == end
        assert answer.json() == list(range(100))


@pytest.mark.parametrize("from_the_start", [False, True])
def test_a_bounded_read_takes_nothing_past_its_bound_from_the_store(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, from_the_start: bool
) -> None:
    """The room left for a JSON body's separators (twice the range) is not spent on the
    messages after the bound, only to be dropped: the store's read itself ends there."""
    ends: list[int] = []
    read = backend.store.read

    def spied(info: Any, start: int, max_bytes: int, whole: bool = False) -> Any:
        batch = read(info, start, max_bytes, whole)
        ends.append(batch.end)
        return batch

    with TestClient(create_app(backend.settings, backend.store)) as client:
        url = f"/v1/stream/bounded-store-{from_the_start}"
        client.put(url, headers=JSON)
        tails = [
            append(client, url, b"[" + b",".join(b'{"n":%d}' % n for n in range(50)) + b"]", JSON)
            for _ in range(10)
        ]
        bound = tails[4]
        monkeypatch.setattr(backend.store, "read", spied)
        start = "-1" if from_the_start else tails[0]
        answer = client.get(url, params={"offset": start, "until": bound})
        assert answer.status_code == 200
        assert answer.headers["stream-next-offset"] == bound
        assert ends and max(ends) == parse_offset(bound).at


def test_a_byte_range_that_ends_inside_an_append_names_its_end_exactly(
    client: TestClient,
) -> None:
    """An exact offset (inside an append) as the bound: the response ends there and says so,
    with the same exact offset, not as if an append ended there."""
    url = "/v1/stream/bytes-inside"
    client.put(url, headers=TEXT)
    tail = append(client, url, b"abcdefghij", TEXT)
    first = client.get(url, params={"offset": "-1", "until": tail})  # 8 bytes a piece here
    inside = first.headers["stream-next-offset"]
    assert first.content == b"abcdefgh" and inside != tail
    answer = client.get(url, params={"offset": "-1", "until": inside})
    assert answer.content == b"abcdefgh"
    assert answer.headers["stream-next-offset"] == inside
