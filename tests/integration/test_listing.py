"""The listing extension: the live streams under a prefix, page by page with cursors that
resume the scan, and clear 400s for what it cannot take."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from durable_streams_aws.client import list_streams
from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.http import listing
from durable_streams_aws.core.runtime import Backend

JSON = {"Content-Type": "application/json"}

pytestmark = pytest.mark.both_dynamodbs


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    settings = backend.settings.model_copy(update={"listing": True})
    with TestClient(create_app(settings, backend.store)) as test_client:
        yield test_client


def test_listing_is_off_unless_the_deployment_turns_it_on(backend: Backend) -> None:
    with TestClient(create_app(backend.settings, backend.store)) as closed:
        closed.put("/v1/stream/secret", headers=JSON)
        answer = closed.get("/v1/stream", params={"prefix": ""})
        assert answer.status_code in {400, 404} and "secret" not in answer.text


def make(client: TestClient, *paths: str) -> None:
    for path in paths:
        assert client.put(f"/v1/stream/{path}", headers=JSON).status_code == 201
        for n in range(3):  # chunk items share the table with the streams being listed
            assert client.post(f"/v1/stream/{path}", json=[n], headers=JSON).status_code == 204


def listed(client: TestClient, prefix: str) -> tuple[list[str], int]:
    """Every stream under `prefix`, and how many pages it took."""
    paths, params, pages = [], {"prefix": prefix}, 0
    while True:
        answer = client.get("/v1/stream", params=params)
        assert answer.status_code == 200, answer.text
        assert answer.headers["cache-control"] == "no-store"
        pages += 1
        paths += answer.json()["streams"]
        if answer.json()["next"] is None:
            return sorted(paths), pages
        params = {"prefix": prefix, "cursor": answer.json()["next"]}


def test_a_prefix_lists_its_live_streams_forks_included(client: TestClient) -> None:
    make(client, "orders/1", "orders/2", "orders/3", "orders-archive", "payments/1", "ünï/1")
    fork = client.put("/v1/stream/orders/4", headers={"Stream-Forked-From": "/v1/stream/orders/1"})
    assert fork.status_code == 201
    assert client.delete("/v1/stream/orders/2").status_code == 204
    assert listed(client, "orders/")[0] == ["orders/1", "orders/3", "orders/4"]
    assert listed(client, "orders")[0] == ["orders-archive", "orders/1", "orders/3", "orders/4"]
    assert listed(client, "ünï/")[0] == ["ünï/1"]
    assert listed(client, "nothing/")[0] == []
    everything = ["orders-archive", "orders/1", "orders/3", "orders/4", "payments/1", "ünï/1"]
    assert listed(client, "")[0] == everything


def test_a_deleted_source_kept_for_its_fork_is_not_listed(client: TestClient) -> None:
    make(client, "src")
    fork = {"Stream-Forked-From": "/v1/stream/src"}
    assert client.put("/v1/stream/copy", headers=fork).status_code == 201
    assert client.delete("/v1/stream/src").status_code == 204
    assert client.get("/v1/stream/copy").json() == [0, 1, 2]  # still read through the fork
    assert listed(client, "")[0] == ["copy"]


def test_cursors_resume_the_scan_page_after_page(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"logs/{n:02d}" for n in range(12)]
    make(client, *names)
    monkeypatch.setattr(listing, "PAGE_ITEMS", 5)
    paths, pages = listed(client, "logs/")
    assert paths == names  # each exactly once, over many pages
    assert pages >= 48 // 5
    client_paths = list(list_streams("http://testserver/v1/stream", "logs/", client=client))
    assert sorted(client_paths) == names


@pytest.mark.parametrize(
    "query",
    [
        "cursor=not-base64!",
        "cursor=" + base64.urlsafe_b64encode(b'{"pk": "s#x"}').decode(),
        "cursor=" + base64.urlsafe_b64encode(b'{"pk": 1, "sk": "meta"}').decode(),
        "cursor=" + base64.urlsafe_b64encode(b"[1]").decode(),
        "cursor=" + base64.urlsafe_b64encode(b'{"pk": "", "sk": ""}').decode(),
        "cursor=" + base64.urlsafe_b64encode(b'{"pk": "s#", "sk": "meta"}').decode(),
        "cursor=" + base64.urlsafe_b64encode(b'{"pk": "x#y", "sk": "meta"}').decode(),
        "cursor=" + base64.urlsafe_b64encode(b'{"pk": "s#a", "sk": ""}').decode(),
        "prefix=a&prefix=b",
        "cursor=a&cursor=b",
        "prefix=%01",
        "prefix=%FF",
        "offset=-1",
        "prefix=" + "x" * 2000,
    ],
)
def test_what_a_listing_cannot_take_is_a_400(client: TestClient, query: str) -> None:
    make(client, "x")
    answer = client.get(f"/v1/stream?{query}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "bad_request"
