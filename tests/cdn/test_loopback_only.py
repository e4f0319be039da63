"""A `dsaws serve` on loopback without access control, as a user starts it, against what a
page of another site can make this machine's browser send (security round 3, F1): requests for
another name (DNS rebinding) get 421, requests from another site's page 403, before anything is
read or written; the server's own pages, pages of this machine and programs that are not
browsers go on working, directly and through the local CDN."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support import ServerProcess

pytestmark = pytest.mark.integration

EVIL = "https://evil.example"
REBOUND = "rebind.evil.example"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(with_cdn=True) as running:
        yield running


def stream(client: httpx.Client, path: str) -> str:
    created = client.put(f"/v1/stream/{path}", headers={"Content-Type": "text/plain"})
    assert created.status_code == 201, created.text
    client.post(f"/v1/stream/{path}", content=b"secret", headers={"Content-Type": "text/plain"})
    return f"/v1/stream/{path}"


def tail(client: httpx.Client, url: str) -> str:
    return str(client.head(url).headers["stream-next-offset"])


@pytest.mark.parametrize("through", ["server", "cdn"])
def test_a_page_of_another_site_can_neither_write_nor_read(
    server: ServerProcess, through: str
) -> None:
    base = server.base_url if through == "server" else server.cdn_url
    assert base is not None
    with httpx.Client(base_url=base, timeout=10) as client:
        url = stream(client, f"foreign-{through}")
        before = tail(client, url)
        # A simple request: no preflight, so CORS alone would not stop it.
        simple = client.post(
            url,
            content=b" injected",
            headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": EVIL},
        )
        assert simple.status_code == 403 and simple.json()["error"] == "cross_site"
        assert tail(client, url) == before
        for target in (f"{url}?offset=-1", "/v1/stream?prefix=", "/console/api/streams"):
            read = client.get(target, headers={"Origin": EVIL})
            assert read.status_code == 403, target
            assert "access-control-allow-origin" not in read.headers
            assert b"secret" not in read.content
        # A preflight changes nothing: answered with what the server allows but no
        # Access-Control-Allow-Origin, so the browser sends no DELETE.
        preflight = client.options(
            url, headers={"Origin": EVIL, "Access-Control-Request-Method": "DELETE"}
        )
        assert preflight.status_code == 204
        assert "access-control-allow-origin" not in preflight.headers
        assert "DELETE" in preflight.headers["access-control-allow-methods"]
        image = client.get(f"{url}?offset=-1", headers={"Sec-Fetch-Site": "cross-site"})
        assert image.status_code == 403
        deleted = client.delete(url, headers={"Origin": "null"})  # a sandboxed frame
        assert deleted.status_code == 403 and client.head(url).status_code == 200


@pytest.mark.parametrize("through", ["server", "cdn"])
def test_another_name_for_this_machine_is_not_served(server: ServerProcess, through: str) -> None:
    """DNS rebinding: the page's own name now points here; it cannot change the Host."""
    base = server.base_url if through == "server" else server.cdn_url
    assert base is not None
    port = base.rsplit(":", 1)[1]
    with httpx.Client(base_url=base, timeout=10) as client:
        url = stream(client, f"rebound-{through}")
        before = tail(client, url)
        rebound = {"Host": f"{REBOUND}:{port}"}
        for method, target in (("GET", f"{url}?offset=-1"), ("GET", "/v1/stream?prefix=")):
            answer = client.request(method, target, headers=rebound)
            assert answer.status_code == 421, (target, answer.text)
            assert b"secret" not in answer.content
        append = client.post(url, content=b"x", headers={**rebound, "Content-Type": "text/plain"})
        assert append.status_code == 421
        assert tail(client, url) == before


@pytest.mark.parametrize("through", ["server", "cdn"])
def test_this_machine_s_pages_and_programs_are_served(server: ServerProcess, through: str) -> None:
    base = server.base_url if through == "server" else server.cdn_url
    assert base is not None
    with httpx.Client(base_url=base, timeout=10) as client:
        url = stream(client, f"local-{through}")
        same = {"Origin": base, "Sec-Fetch-Site": "same-origin"}
        assert client.get(f"{url}?offset=-1", headers=same).content == b"secret"
        frontend = {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "cross-site"}
        read = client.get(f"{url}?offset=-1", headers=frontend)
        assert read.status_code == 200
        assert read.headers["access-control-allow-origin"] == "http://localhost:3000"
        preflight = client.options(
            url,
            headers={"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 200
        assert client.get("/console/api/session", headers=same).status_code == 200
        local_name = base.replace("127.0.0.1", "localhost")
        with httpx.Client(base_url=local_name, timeout=10) as by_name:
            assert by_name.get(f"{url}?offset=-1").content == b"secret"
