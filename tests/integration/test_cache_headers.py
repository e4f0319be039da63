"""Every response the origin sends carries the Cache-Control the caching rules decide (a CDN
would apply its default TTL to one without), and the CORS headers a cached copy needs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from starlette.testclient import TestClient
from support import sse_value

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.http import streams
from durable_streams_aws.core.protocol.cursor import next_cursor
from durable_streams_aws.core.runtime import Backend

SHARED = "public, max-age=60, stale-while-revalidate=300"
# Stale for as long as a long-poll lasts (0.3 s here, rounded up).
TIMEOUT = "public, max-age=1, stale-while-revalidate=1"
TEXT = {"Content-Type": "text/plain"}


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    settings = backend.settings.model_copy(
        update={
            "max_read_bytes": 4,
            "max_read_from_start_bytes": 4,
            "long_poll_timeout": 0.3,
            "sse_lifetime": 0.3,
        }
    )
    with TestClient(create_app(settings, backend.store)) as test_client:
        yield test_client


def offset_after(client: TestClient, url: str, params: dict[str, str]) -> str:
    return str(client.get(url, params=params).headers["stream-next-offset"])


def test_every_kind_of_response_has_the_cache_control_it_should(client: TestClient) -> None:
    url = "/v1/stream/c"
    seen: dict[str, tuple[int, str]] = {}

    def record(label: str, response: httpx.Response) -> None:
        seen[label] = (response.status_code, response.headers.get("cache-control"))

    record("create", client.put(url, headers=TEXT, content=b"abcdef"))
    record("create again", client.put(url, headers=TEXT))
    record("append", client.post(url, headers=TEXT, content=b"gh"))
    record("head", client.head(url))
    record("mid-stream chunk", client.get(url, params={"offset": "-1"}))
    middle = offset_after(client, url, {"offset": "-1"})
    record("chunk reaching the open tail", client.get(url, params={"offset": middle}))
    tail = offset_after(client, url, {"offset": middle})
    record("empty read at the open tail", client.get(url, params={"offset": tail}))
    record("offset=now", client.get(url, params={"offset": "now"}))
    record("long-poll with data", client.get(url, params={"offset": "-1", "live": "long-poll"}))
    record("long-poll timeout", client.get(url, params={"offset": tail, "live": "long-poll"}))
    record("sse", client.get(url, params={"offset": tail, "live": "sse"}))
    record("error 400", client.get(url, params={"offset": "bogus"}))
    record("error 404", client.get("/v1/stream/none"))
    record("unknown route", client.get("/elsewhere"))
    record(
        "preflight",
        client.options(
            url, headers={"Origin": "https://a.example", "Access-Control-Request-Method": "GET"}
        ),
    )
    record("close", client.post(url, headers={"Stream-Closed": "true"}))
    record("closed tail", client.get(url, params={"offset": tail}))
    record("closed long-poll", client.get(url, params={"offset": tail, "live": "long-poll"}))
    record("delete", client.delete(url))

    assert seen == {
        "create": (201, "no-store"),
        "create again": (200, "no-store"),
        "append": (204, "no-store"),
        "head": (200, "no-store"),
        "mid-stream chunk": (200, SHARED),
        "chunk reaching the open tail": (200, "no-store"),
        "empty read at the open tail": (200, "no-store"),
        "offset=now": (200, "no-store"),
        "long-poll with data": (200, SHARED),
        "long-poll timeout": (204, TIMEOUT),
        "sse": (200, "no-cache, no-store"),
        "error 400": (400, "no-store"),
        "error 404": (404, "no-store"),
        "unknown route": (404, "no-store"),
        "preflight": (200, "no-store"),
        "close": (204, "no-store"),
        "closed tail": (200, SHARED),
        "closed long-poll": (204, SHARED),
        "delete": (204, "no-store"),
    }


def test_a_304_carries_the_cache_control_of_the_response_it_stands_for(
    client: TestClient,
) -> None:
    url = "/v1/stream/e"
    client.put(url, headers=TEXT, content=b"abcdefgh")
    first = client.get(url, params={"offset": "-1"})
    weak = "W/" + first.headers["etag"]
    again = client.get(url, params={"offset": "-1"}, headers={"If-None-Match": weak})
    assert again.status_code == 304
    assert again.headers["cache-control"] == first.headers["cache-control"] == SHARED


def test_cached_copies_carry_cors_headers_whoever_first_asked(client: TestClient) -> None:
    url = "/v1/stream/cors"
    client.put(url, headers=TEXT, content=b"abcdefgh")
    without_origin = client.get(url, params={"offset": "-1"})
    assert without_origin.headers["access-control-allow-origin"] == "*"
    assert "Stream-Next-Offset" in without_origin.headers["access-control-expose-headers"]


def test_answers_nobody_may_store_carry_cors_headers_only_for_a_cross_origin_request(
    client: TestClient,
) -> None:
    url = "/v1/stream/cors-append"
    client.put(url, headers=TEXT)
    plain = client.post(url, headers=TEXT, content=b"a")
    assert plain.headers["cache-control"] == "no-store"
    assert "access-control-allow-origin" not in plain.headers
    assert "access-control-expose-headers" not in plain.headers
    browser = client.post(url, headers={**TEXT, "Origin": "https://a.example"}, content=b"b")
    assert browser.headers["access-control-allow-origin"] == "*"
    assert "Stream-Next-Offset" in browser.headers["access-control-expose-headers"]
    assert plain.headers["x-content-type-options"] == "nosniff"  # the others stay


def test_duplicate_cursors_are_refused(client: TestClient) -> None:
    url = "/v1/stream/dup"
    client.put(url, headers=TEXT, content=b"x")
    response = client.get(f"{url}?offset=-1&live=long-poll&cursor=1&cursor=2")
    assert response.status_code == 400


def test_live_cursors_converge_for_a_late_reader(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower that has been reading along and a reader who just joined are handed the same
    cursor for the same data, so a CDN keys them together."""
    # One clock reading for every cursor: answers a second apart differ until the next append.
    frozen = time.time()
    monkeypatch.setattr(
        streams, "next_cursor", lambda _, echoed, position: next_cursor(frozen, echoed, position)
    )
    url = "/v1/stream/conv"
    client.put(url, headers=TEXT, content=b"a")
    follower = client.get(url, params={"offset": "-1", "live": "long-poll"})
    cursor = follower.headers["stream-cursor"]
    for piece in (b"b", b"c", b"d"):
        offset = follower.headers["stream-next-offset"]
        client.post(url, headers=TEXT, content=piece)
        follower = client.get(url, params={"offset": offset, "live": "long-poll", "cursor": cursor})
        cursor = follower.headers["stream-cursor"]
    offset = follower.headers["stream-next-offset"]
    client.post(url, headers=TEXT, content=b"e")
    late = client.get(url, params={"offset": offset, "live": "long-poll"})
    along = client.get(url, params={"offset": offset, "live": "long-poll", "cursor": cursor})
    assert late.content == along.content == b"e"
    assert late.headers["stream-cursor"] == along.headers["stream-cursor"]


def test_a_bounded_sse_window_hands_on_a_new_cache_key(backend: Backend) -> None:
    """Inside Lambda an SSE response is one bounded window. Whether it ends with data or empty,
    its last control event moves the reader to a URL (offset, cursor) it has not asked for
    before, so a CDN that collapses or keeps windows can never hand the reader the same window
    twice, and a window never claims the end of an open stream."""
    settings = backend.settings.model_copy(update={"sse_mode": "window", "sse_window": 0.3})
    with TestClient(create_app(settings, backend.store)) as client:
        url = "/v1/stream/window"
        client.put(url, headers=TEXT, content=b"abc")
        asked: set[tuple[str, str | None]] = set()
        offset, cursor = "-1", None
        for _ in range(4):  # a window with data, then empty windows at the tail
            assert (offset, cursor) not in asked
            asked.add((offset, cursor))
            params = {"offset": offset, "live": "sse", **({"cursor": cursor} if cursor else {})}
            response = client.get(url, params=params)
            assert response.headers["cache-control"] == "no-cache, no-store"
            controls = [
                json.loads(sse_value(line))
                for line in response.text.splitlines()
                if line.startswith("data:{")
            ]
            last = controls[-1]
            assert "streamClosed" not in last
            new_cursor = last["streamCursor"]
            assert cursor is None or int(new_cursor) > int(cursor)
            offset, cursor = last["streamNextOffset"], new_cursor
