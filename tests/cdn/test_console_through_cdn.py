"""The console through the local CDN (nginx configured like the CloudFront distribution): its
fingerprinted assets are cached, its page is asked of the origin each time (so a new version
is seen at the next load), and nothing of its API is ever kept."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.support import ServerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cdn_url() -> Iterator[str]:
    with ServerProcess(with_cdn=True) as server:
        assert server.cdn_url is not None
        yield server.cdn_url


def _twice(client: httpx.Client, url: str) -> list[httpx.Response]:
    return [client.get(url) for _ in range(2)]


def test_assets_are_cached_the_page_and_the_api_never(cdn_url: str) -> None:
    with httpx.Client(base_url=cdn_url, timeout=10) as client:
        pages = _twice(client, "/console/")
        assert [page.status_code for page in pages] == [200, 200]
        assert all(page.headers["x-cache-status"] != "HIT" for page in pages)
        assets = re.findall(r'(?:src|href)="(assets/[^"]+)"', pages[0].text)
        assert assets
        for name in assets:
            first, second = _twice(client, f"/console/{name}")
            assert first.status_code == 200 and second.headers["x-cache-status"] == "HIT"
            assert second.content == first.content
        stream = "/v1/stream/cdn-console"
        assert client.put(stream, headers={"Content-Type": "text/plain"}).status_code == 201
        before = client.get("/console/api/overview").json()
        assert (
            client.post(stream, content=b"x", headers={"Content-Type": "text/plain"}).status_code
            == 204
        )
        after = client.get("/console/api/overview")
        assert after.headers["x-cache-status"] != "HIT"
        appended = [
            sum(n for _, n in doc["rates"]["series"]["appends"]) for doc in (before, after.json())
        ]
        assert appended[1] == appended[0] + 1
        for path in (
            "/console/api/session",
            "/console/api/streams",
            "/console/api/stream/cdn-console",
        ):
            answers = _twice(client, path)
            assert [a.status_code for a in answers] == [200, 200], path
            assert all(a.headers["x-cache-status"] != "HIT" for a in answers), path
            assert all(a.headers["cache-control"] == "no-store" for a in answers), path
