"""HTTP behaviour the conformance suite does not pin down: limits, errors, CORS, 503s."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import StoreUnavailable


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    settings = backend.settings.model_copy(
        update={"max_append_bytes": 1000, "max_read_bytes": 64, "long_poll_timeout": 0.5}
    )
    with TestClient(create_app(settings, backend.store)) as test_client:
        yield test_client


URL = "/v1/stream/h"


def test_append_over_the_limit_is_413_and_stores_nothing(client: TestClient) -> None:
    client.put(URL, headers={"Content-Type": "text/plain"}, content=b"keep")
    response = client.post(URL, headers={"Content-Type": "text/plain"}, content=b"x" * 1001)
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    assert client.get(URL).content == b"keep"


def test_chunked_body_over_the_limit_is_413(client: TestClient) -> None:
    client.put(URL, headers={"Content-Type": "text/plain"})

    def pieces() -> Iterator[bytes]:
        for _ in range(20):
            yield b"y" * 100

    response = client.post(URL, headers={"Content-Type": "text/plain"}, content=pieces())
    assert response.status_code == 413
    assert client.get(URL).content == b""


def test_reads_are_capped_and_up_to_date_only_at_the_tail(client: TestClient) -> None:
    created = client.put(URL, headers={"Content-Type": "text/plain"}, content=b"a" * 100)
    client.post(URL, headers={"Content-Type": "text/plain"}, content=b"b" * 100)
    # From the start, one response carries the whole stream (up to the front door's limit).
    whole = client.get(URL)
    assert whole.content == b"a" * 100 + b"b" * 100 and whole.headers["stream-up-to-date"]
    # From anywhere else, max_read_bytes (64): an append larger than that is cut inside it.
    first = client.get(URL, params={"offset": created.headers["stream-next-offset"]})
    assert first.content == b"b" * 64 and "stream-up-to-date" not in first.headers
    rest = client.get(URL, params={"offset": first.headers["stream-next-offset"]})
    assert rest.content == b"b" * 36 and rest.headers["stream-up-to-date"] == "true"


@pytest.mark.parametrize(
    ("method", "headers", "status"),
    [
        ("GET", {}, 404),
        ("HEAD", {}, 404),
        ("DELETE", {}, 404),
        ("POST", {"Content-Type": "text/plain"}, 404),
    ],
)
def test_missing_stream_errors(
    client: TestClient, method: str, headers: dict[str, str], status: int
) -> None:
    response = client.request(method, "/v1/stream/absent", headers=headers, content=b"x")
    assert response.status_code == status
    assert response.headers["x-content-type-options"] == "nosniff"
    if method != "HEAD":
        assert response.json()["error"] == "not_found"


@pytest.mark.parametrize("path", ["a/%2E%2E/b", "a/%2E/b", "a%00b"])
def test_dot_segments_and_control_characters_are_rejected(client: TestClient, path: str) -> None:
    response = client.put("/v1/stream/" + path, headers={"Content-Type": "text/plain"})
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"


def test_unknown_live_mode_and_an_exact_offset_past_tail_are_400(client: TestClient) -> None:
    client.put(URL, headers={"Content-Type": "text/plain"}, content=b"abc")
    assert client.get(URL, params={"offset": "-1", "live": "forever"}).status_code == 400
    beyond = f"{0:016d}_{99:016d}"
    response = client.get(URL, params={"offset": beyond + "_i"})
    assert response.status_code == 400 and "past the end" in response.json()["message"]
    # A plain one lies inside the append still to come: it reads as the tail, as from the
    # reference server (test_reads_inside_appends.py).
    response = client.get(URL, params={"offset": beyond})
    assert response.status_code == 200 and response.content == b""
    assert response.headers["stream-next-offset"] == f"{0:016d}_{3:016d}"


def test_cors_preflight_allows_protocol_headers(client: TestClient) -> None:
    response = client.options(
        URL,
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "producer-id, if-none-match, stream-closed",
        },
    )
    assert response.status_code == 200
    allowed = response.headers["access-control-allow-headers"].lower()
    for header in ("producer-id", "if-none-match", "stream-closed"):
        assert header in allowed
    simple = client.get("/v1/stream/absent", headers={"Origin": "https://app.example"})
    assert "stream-next-offset" in simple.headers["access-control-expose-headers"].lower()


def test_long_poll_at_a_closed_tail_returns_at_once(client: TestClient) -> None:
    created = client.put(URL, headers={"Content-Type": "text/plain", "Stream-Closed": "true"})
    offset = created.headers["stream-next-offset"]
    response = client.get(URL, params={"offset": offset, "live": "long-poll"})
    assert response.status_code == 204
    assert response.headers["stream-closed"] == "true"
    assert "stream-cursor" not in response.headers


def test_woken_long_poll_gets_the_final_data_with_the_closed_signal(backend: Backend) -> None:
    async def scenario() -> None:
        transport = httpx.ASGITransport(app=create_app(backend.settings, backend.store))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            created = await client.put(URL, headers={"Content-Type": "text/plain"})
            offset = created.headers["stream-next-offset"]
            waiting = asyncio.create_task(
                client.get(URL, params={"offset": offset, "live": "long-poll"})
            )
            await asyncio.sleep(0.3)
            closing = await client.post(
                URL,
                content=b"last words",
                headers={"Content-Type": "text/plain", "Stream-Closed": "true"},
            )
            assert closing.status_code == 204
            response = await waiting
            assert response.status_code == 200 and response.content == b"last words"
            assert response.headers["stream-closed"] == "true"

    asyncio.run(scenario())


class UnavailableStore:
    """Every call fails as AWS does when throttling outlasts the retries."""

    def __getattr__(self, name: str) -> Any:
        def fail(*_: Any, **__: Any) -> Any:
            raise StoreUnavailable("throttled")

        return fail


def test_unavailable_storage_is_503_with_retry_after(backend: Backend) -> None:
    store: Any = UnavailableStore()
    with TestClient(create_app(backend.settings, store)) as client:
        response = client.post(URL, headers={"Content-Type": "text/plain"}, content=b"x")
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert client.get(URL).status_code == 503


def test_sliding_ttl_through_http_never_expires_early_and_head_does_not_renew(
    backend: Backend,
) -> None:
    """TTL 4 s with a 1 s renewal window. A read 0.5 s in writes nothing, yet the protocol
    says it restarts the countdown: the stream must still be there at 4.2 s. HEAD does not
    renew: a stream seen only by HEAD since is gone once the TTL plus the window has passed."""
    settings = backend.settings.model_copy(update={"ttl_renew_fraction": 0.25})
    with TestClient(create_app(settings, backend.store)) as client:
        started = time.monotonic()
        created = client.put(URL, headers={"Content-Type": "text/plain", "Stream-TTL": "4"})
        assert created.status_code == 201
        time.sleep(0.5)
        assert client.get(URL).status_code == 200  # inside the window: not recorded
        time.sleep(max(0.0, started + 4.2 - time.monotonic()))
        assert client.head(URL).status_code == 200, "expired before the read plus the TTL"
        time.sleep(max(0.0, started + 5.3 - time.monotonic()))
        assert client.head(URL).status_code == 404, "HEAD must not have renewed the TTL"
        assert client.get(URL).status_code == 404


@pytest.mark.parametrize(
    ("forwarded", "location_host"),
    [
        (None, "testserver"),
        ("d111.cloudfront.net", "d111.cloudfront.net"),
        ("cdn.example:8080, inner.example", "cdn.example:8080"),
    ],
)
def test_location_names_the_host_the_client_used(
    client: TestClient, forwarded: str | None, location_host: str
) -> None:
    """Through a CDN the origin sees its own Host; the CDN passes the viewer's on."""
    headers = {"Content-Type": "text/plain"}
    if forwarded is not None:
        headers["X-Forwarded-Host"] = forwarded
    response = client.put("/v1/stream/where", headers=headers)
    assert response.headers["location"] == f"http://{location_host}/v1/stream/where"


def test_a_fork_may_name_its_source_by_the_cdn_url(client: TestClient) -> None:
    client.put("/v1/stream/src", headers={"Content-Type": "text/plain"}, content=b"abc")
    response = client.put(
        "/v1/stream/fork",
        headers={
            "Stream-Forked-From": "https://d111.cloudfront.net/v1/stream/src",
            "X-Forwarded-Host": "d111.cloudfront.net",
        },
    )
    assert response.status_code == 201
    assert client.get("/v1/stream/fork").content == b"abc"
