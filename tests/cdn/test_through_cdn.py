"""Reads through the local CDN (nginx configured like the CloudFront distribution): many live
readers cost the origin about one request per append, catch-up chunks are served once, and
caching never hides data, closure or the tail."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from benchmarks.cdn_fanout import Rig, fanout, rig
from durable_streams_aws.core.cdn import DEFAULT_POLICY

pytestmark = pytest.mark.integration

CHUNK = 32 * 1024
STREAM_BYTES = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def cdn() -> Iterator[Rig]:
    # Reads from a stream's start capped like any other, so that a catch-up spans several
    # cacheable chunks (whole reads from the start and their cost: benchmarks/catch_up_cdn.py).
    with rig(long_poll_timeout=5.0, listing=True, max_read_from_start_bytes=1 << 20) as running:
        yield running


def url(cdn: Rig, name: str, via_cdn: bool = True) -> str:
    return cdn.stream_url(cdn.cdn_url if via_cdn else cdn.origin_url, name)


def test_two_hundred_live_readers_cost_one_origin_request_per_append(cdn: Rig) -> None:
    result = asyncio.run(fanout(cdn, readers=200, appends=20, spacing=0.5))
    print(
        f"\n200 readers, 20 appends: {result.origin_reads} origin reads "
        f"({result.origin_reads_per_append:.2f} per append), "
        f"{result.aws_calls_per_append:.1f} AWS calls per append, "
        f"CDN hit ratio {result.hit_ratio:.1%}, reader requests {result.reader_requests}, "
        f"latency p50 {result.percentile_ms(0.5):.0f} ms p99 {result.percentile_ms(0.99):.0f} ms"
    )
    assert result.problems == []  # every reader got every message once, in order
    assert result.origin_reads_per_append <= 2.0
    assert result.hit_ratio > 0.95


@pytest.fixture(scope="module")
def short_polls() -> Iterator[Rig]:
    # Long-polls shorter than the readers' pauses: readers that sleep up to 500 ms between
    # polls fall more than a long-poll behind (as readers 15 to 40 s behind do with the
    # deployed 15 s), and ask for keys whose 204 has expired by then.
    with rig(long_poll_timeout=0.2) as running:
        yield running


def test_lagging_readers_cost_one_refresh_per_expired_key_not_one_per_reader(
    short_polls: Rig,
) -> None:
    """nginx's lock covers only new entries: before 204s could be served stale, every lagging
    reader that asked for an expired 204's key went to the origin, and once data had arrived
    each was a data read (here: 2.0 to 3.4 per append, one key read up to 26 times). Served
    the stale 204 while one request refreshes it, they move on to the key the others went to."""
    result = asyncio.run(fanout(short_polls, readers=200, appends=20, spacing=0.4, lag=0.5))
    print(
        f"\n200 lagging readers, 20 appends: {result.origin_data_reads_per_append:.2f} origin "
        f"data reads per append, {result.origin_reads_per_append:.2f} origin reads per append, "
        f"at most {result.busiest_key_reads} of one key; {dict(result.cache_statuses)}"
    )
    assert result.problems == []  # every reader got every message once, in order
    # A key's first answer, and at most one refresh once it has expired: the appends come
    # less than a 204's lifetime apart, so a refresh finds data and is kept for a minute.
    assert result.busiest_key_reads <= 2
    # Per append, the long-poll the append answers, and the refreshes of the 204s before it
    # that lagging readers reach late (about one here): never one per reader.
    assert result.origin_data_reads_per_append <= 2.0


def _write_stream(cdn: Rig, name: str, close: bool) -> bytes:
    origin = url(cdn, name, via_cdn=False)
    data = bytearray()
    with httpx.Client(timeout=30) as client:
        assert client.put(origin, headers={"Content-Type": "text/plain"}).status_code == 201
        for index in range(STREAM_BYTES // CHUNK):
            piece = bytes([65 + index % 26]) * CHUNK
            response = client.post(origin, content=piece, headers={"Content-Type": "text/plain"})
            assert response.status_code == 204
            data += piece
        if close:
            assert client.post(origin, headers={"Stream-Closed": "true"}).status_code == 204
    return bytes(data)


async def _catch_up(cdn: Rig, name: str, readers: int) -> list[bytes]:
    async def read() -> bytes:
        out, offset = bytearray(), "-1"
        async with httpx.AsyncClient(timeout=60) as client:
            while True:
                response = await client.get(url(cdn, name), params={"offset": offset})
                assert response.status_code == 200, response.text
                out += response.content
                offset = response.headers["stream-next-offset"]
                if response.headers.get("stream-up-to-date") == "true":
                    return bytes(out)

    return list(await asyncio.gather(*(read() for _ in range(readers))))


def _origin_reads(cdn: Rig, name: str) -> dict[str, int]:
    prefix = f"{cdn.backend.settings.base_path}/{name}?"
    return {key: count for key, count in cdn.counter.reads.items() if key.startswith(prefix)}


def _catch_up_reads(cdn: Rig, name: str, close: bool, readers: int = 50) -> dict[str, int]:
    """Origin reads per read URL while `readers` read a fresh 2 MiB stream from the start."""
    data = _write_stream(cdn, name, close=close)
    cdn.counter.reset()
    results = asyncio.run(_catch_up(cdn, name, readers=readers))
    assert all(result == data for result in results)
    reads = _origin_reads(cdn, name)
    state = "closed" if close else "open"
    print(f"\n{readers} readers of a {state} 2 MiB stream: origin reads per chunk {reads}")
    return reads


def test_fifty_catch_up_readers_of_a_closed_stream_get_each_chunk_from_the_origin_once(
    cdn: Rig,
) -> None:
    reads = _catch_up_reads(cdn, "catch-up-closed", close=True)
    assert len(reads) >= 2  # the stream spans several chunks
    assert set(reads.values()) == {1}


def test_an_open_streams_tail_chunk_reaches_the_origin_for_every_reader(cdn: Rig) -> None:
    """Read-your-writes: the chunk that reaches the tail of an open stream is not cached, so a
    writer reading after its append sees it. Every earlier chunk is still served once."""
    counts = sorted(_catch_up_reads(cdn, "catch-up-open", close=False).values())
    assert counts[:-1] == [1] * (len(counts) - 1) and counts[-1] == 50


def test_a_writer_reads_its_own_append_through_the_cdn(cdn: Rig) -> None:
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "ryw")
        assert client.put(stream, headers={"Content-Type": "text/plain"}).status_code == 201
        seen = b""
        for word in (b"one ", b"two ", b"three"):
            assert client.post(stream, content=word, headers={"Content-Type": "text/plain"})
            seen += word
            assert client.get(stream, params={"offset": "-1"}).content == seen


def test_closure_after_a_cached_chunk_is_discovered_at_the_next_offset(cdn: Rig) -> None:
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "closing")
        client.put(stream, headers={"Content-Type": "text/plain"}, content=b"data")
        first = client.get(stream, params={"offset": "-1", "live": "long-poll"})
        assert first.status_code == 200 and "stream-closed" not in first.headers
        client.post(stream, headers={"Stream-Closed": "true"})
        again = client.get(stream, params={"offset": "-1", "live": "long-poll"})
        assert again.headers["x-cache-status"] == "HIT"  # the cached chunk, without closure
        params = {"offset": again.headers["stream-next-offset"], "live": "long-poll"}
        params["cursor"] = again.headers["stream-cursor"]
        end = client.get(stream, params=params)
        assert end.status_code == 204 and end.headers["stream-closed"] == "true"
        head = client.head(stream)
        assert head.headers["stream-closed"] == "true"


def test_head_is_never_answered_from_a_cached_get(cdn: Rig) -> None:
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "head")
        client.put(stream, headers={"Content-Type": "text/plain", "Stream-TTL": "3600"})
        for _ in range(3):
            client.post(stream, content=b"x" * 600_000, headers={"Content-Type": "text/plain"})
        chunk = client.get(stream)  # cacheable: the first chunk stops short of the tail
        assert chunk.headers["cache-control"].startswith("public")
        assert client.get(stream).headers["x-cache-status"] == "HIT"
        head = client.head(stream)
        assert head.headers["stream-next-offset"] != chunk.headers["stream-next-offset"]
        assert head.headers["stream-ttl"] == "3600"
        assert head.headers["cache-control"] == "no-store"


def test_weak_etags_from_compression_revalidate(cdn: Rig) -> None:
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "weak")
        client.put(stream, headers={"Content-Type": "application/json"})
        messages = [{"n": n, "text": "compressible " * 20} for n in range(40)]
        client.post(stream, json=messages, headers={"Content-Type": "application/json"})
        client.post(stream, json=[{"n": "last"}], headers={"Content-Type": "application/json"})
        params = {"offset": "-1"}
        first = client.get(stream, params=params, headers={"Accept-Encoding": "gzip"})
        assert first.headers["content-encoding"] == "gzip"
        assert first.headers["etag"].startswith('W/"')  # nginx weakens it, as CloudFront does
        assert json.loads(first.content)[0]["n"] == 0
        second = client.get(
            stream,
            params=params,
            headers={"Accept-Encoding": "gzip", "If-None-Match": first.headers["etag"]},
        )
        assert second.status_code == 304


def test_query_parameter_order_does_not_split_the_cache(cdn: Rig) -> None:
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "order")
        client.put(stream, headers={"Content-Type": "text/plain"}, content=b"abc")
        client.post(stream, content=b"def", headers={"Content-Type": "text/plain"})
        offset = "0000000000000000_0000000000000000"
        first = client.get(f"{stream}?offset={offset}&live=long-poll")
        second = client.get(f"{stream}?live=long-poll&offset={offset}")
        assert first.headers["x-cache-status"] == "MISS"
        assert second.headers["x-cache-status"] == "HIT"
        assert second.content == first.content == b"abcdef"


def test_an_sse_stream_is_passed_through_as_it_is_written(cdn: Rig) -> None:
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "sse")
        client.put(stream, headers={"Content-Type": "text/plain"}, content=b"hello")
        with client.stream("GET", stream, params={"offset": "-1", "live": "sse"}) as events:
            assert events.headers["cache-control"] == "no-cache, no-store"
            first = next(events.iter_text())  # arrives while the stream is still open
            assert "hello" in first


def test_a_read_parameter_spelled_otherwise_cannot_poison_the_cache(cdn: Rig) -> None:
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "spelling")
        client.put(stream, headers={"Content-Type": "text/plain"}, content=b"old")
        client.post(stream, content=b"-more", headers={"Content-Type": "text/plain"})
        sneaky = client.get(f"{stream}?offset=-1&%6Cive=long-poll")
        assert sneaky.status_code == 400
        client.post(stream, content=b"-new", headers={"Content-Type": "text/plain"})
        assert client.get(f"{stream}?offset=-1").content == b"old-more-new"


def test_offset_now_long_polls_each_see_the_next_append(cdn: Rig) -> None:
    """Readers who subscribe at the tail before an append all receive it: nginx must not queue
    them behind one another (each would start from a later tail)."""

    async def scenario() -> list[bytes]:
        stream = url(cdn, "now")
        async with httpx.AsyncClient(timeout=30) as client:
            await client.put(stream, headers={"Content-Type": "text/plain"}, content=b"before")

            async def subscribe() -> bytes:
                async with httpx.AsyncClient(timeout=30) as own:
                    params = {"offset": "now", "live": "long-poll"}
                    response = await own.get(stream, params=params)
                    return response.content if response.status_code == 200 else b""

            readers = [asyncio.create_task(subscribe()) for _ in range(4)]
            await asyncio.sleep(1.0)
            await client.post(stream, content=b"after", headers={"Content-Type": "text/plain"})
            return list(await asyncio.gather(*readers))

    assert asyncio.run(scenario()) == [b"after"] * 4


def test_an_expired_long_poll_timeout_is_served_stale_only_while_one_request_refreshes_it(
    cdn: Rig,
) -> None:
    """A 204 is fresh for a second; after that a reader who lags is served it stale (it only
    polls again with its cursor) while one request refreshes it, and the refresh's answer
    replaces it for everyone after."""
    cdn.counter.reset()
    with httpx.Client(timeout=30) as client:
        stream = url(cdn, "timeout")
        created = client.put(stream, headers={"Content-Type": "text/plain"})
        params = {"offset": created.headers["stream-next-offset"], "live": "long-poll"}
        first = client.get(stream, params=params)
        assert first.status_code == 204 and first.headers["x-cache-status"] == "MISS"
        assert client.get(stream, params=params).headers["x-cache-status"] == "HIT"
        client.post(stream, content=b"data", headers={"Content-Type": "text/plain"})
        time.sleep(2.5)  # past max-age=1 (nginx counts whole seconds), within the allowance
        stale = client.get(stream, params=params)
        assert stale.status_code == 204 and stale.headers["x-cache-status"] == "STALE"
        for _ in range(50):  # the refresh runs in the background, and finds the data at once
            refreshed = client.get(stream, params=params)
            if refreshed.status_code == 200:
                break
            time.sleep(0.1)
        assert refreshed.content == b"data" and refreshed.headers["x-cache-status"] == "HIT"
    # The first answer and the one refresh.
    assert list(_origin_reads(cdn, "timeout").values()) == [2]


def test_a_bounded_read_has_a_cache_entry_of_its_own(cdn: Rig) -> None:
    """`until` is part of the cache key: the CDN never answers a bounded read with the copy of
    an unbounded one (or the other way round). A range that ends before the tail never changes,
    so its repeats are served from the cache (a read that reaches the tail is not cached)."""
    name = "bounded"
    origin = url(cdn, name, via_cdn=False)
    with httpx.Client(timeout=30) as client:
        client.put(origin, headers={"Content-Type": "text/plain"})
        bound = client.post(origin, content=b"abc", headers={"Content-Type": "text/plain"})
        client.post(origin, content=b"def", headers={"Content-Type": "text/plain"})
        until = bound.headers["stream-next-offset"]
        answers = [
            client.get(url(cdn, name), params=params).content
            for params in (
                {"offset": "-1"},
                {"offset": "-1", "until": until},
                {"offset": "-1"},
                {"offset": "-1", "until": until},
            )
        ]
    assert answers == [b"abcdef", b"abc", b"abcdef", b"abc"]
    reads = _origin_reads(cdn, name)
    bounded = [count for key, count in reads.items() if "until=" in key]
    assert bounded == [1], reads


def test_listings_through_the_cdn_answer_each_prefix(cdn: Rig) -> None:
    """A listing is never stored, but CloudFront collapses requests with the same cache key in
    flight (even uncacheable ones): the prefix is part of the key, so concurrent listings of
    two prefixes are two requests. (nginx does not collapse answers it may not store, so here
    this checks the listing's way through the CDN; the key is checked against the policy.)"""
    assert "prefix" in DEFAULT_POLICY.key_query_parameters
    with httpx.Client(timeout=30) as client:
        for name in ("listed-a/1", "listed-b/1"):
            assert client.put(url(cdn, name, via_cdn=False)).status_code == 201
    base = url(cdn, "x").rsplit("/", 1)[0]

    async def listings() -> list[tuple[str, list[str]]]:
        async with httpx.AsyncClient(timeout=30) as client:

            async def listing(prefix: str) -> tuple[str, list[str]]:
                streams, params = [], {"prefix": prefix}
                while True:  # page after page: a page may hold none of them
                    answer = await client.get(base, params=params)
                    assert answer.status_code == 200, answer.text
                    assert answer.headers["cache-control"] == "no-store"
                    streams += answer.json()["streams"]
                    if answer.json()["next"] is None:
                        return prefix, streams
                    params = {"prefix": prefix, "cursor": answer.json()["next"]}

            prefixes = ["listed-a/", "listed-b/"] * 15
            return await asyncio.gather(*(listing(prefix) for prefix in prefixes))

    for prefix, streams in asyncio.run(listings()):
        assert streams == [prefix + "1"]


def test_stored_html_is_sandboxed_and_a_download_through_the_cdn(cdn: Rig) -> None:
    """A writer's `text/html` or SVG stream would run its script on the CDN's origin if a
    browser navigated to it: every read carries the sandboxing CSP, and an active type is a
    download, from the origin and from nginx's cache alike."""
    for name, kind, active in (
        ("page.html", "text/html; charset=utf-8", True),
        ("image.svg", "image/svg+xml", True),
        ("notes.txt", "text/plain", False),
    ):
        origin = url(cdn, name, via_cdn=False)
        body = b"<script>alert(document.domain)</script>"
        closed = {"Content-Type": kind, "Stream-Closed": "true"}  # cacheable to its end
        assert httpx.put(origin, headers=closed, content=body).status_code == 201
        for attempt in ("MISS", "HIT"):
            read = httpx.get(url(cdn, name), params={"offset": "-1"})
            assert read.status_code == 200 and read.content == body
            assert read.headers["x-cache-status"] == attempt
            assert read.headers["content-security-policy"] == "sandbox; default-src 'none'"
            assert read.headers["x-content-type-options"] == "nosniff"
            assert (read.headers.get("content-disposition") == "attachment") is active, name
