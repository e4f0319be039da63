"""The console's server side through HTTP: its page and assets, and its JSON API (a listing
with metadata, a stream's internals, forks, the overview, subscriptions), with and without
access control. The page itself is driven in a real browser in tests/console."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.auth import OPEN
from durable_streams_aws.core.config import SettingsError, load_settings
from durable_streams_aws.core.console import CSP, add_console, page_csp
from durable_streams_aws.core.runtime import Backend
from tests.auth_support import AUDIENCE, CURRENT_KID, CURRENT_SECRET, KEY_SET_TEXT, bearer, token

JSON = {"Content-Type": "application/json"}
ROOT = "/v1/stream"

pytestmark = pytest.mark.both_dynamodbs


def _app(backend: Backend, **settings: Any) -> TestClient:
    changed = backend.settings.model_copy(update={"console": True, "listing": True, **settings})
    return TestClient(create_app(changed, backend.store))


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    with _app(backend) as test_client:
        yield test_client


@pytest.fixture
def secured(backend: Backend) -> Iterator[TestClient]:
    with _app(backend, auth=True, auth_secret=KEY_SET_TEXT) as test_client:
        yield test_client


def _make(
    client: TestClient, path: str, *messages: Any, headers: dict[str, str] | None = None
) -> None:
    extra = headers or {}
    assert client.put(f"{ROOT}/{path}", headers={**JSON, **extra}).status_code in {200, 201}
    for message in messages:
        answer = client.post(f"{ROOT}/{path}", json=[message], headers={**JSON, **extra})
        assert answer.status_code == 204, answer.text


# ---------------------------------------------------------------------- the page


def test_the_page_names_its_assets_by_content_and_carries_its_policy(client: TestClient) -> None:
    page = client.get("/console/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-cache"
    # Scripts only by the nonce of this load of the page, which each of its script tags carry.
    policy = page.headers["content-security-policy"]
    nonce = re.fullmatch(r".*script-src 'nonce-([A-Za-z0-9_-]{24})';.*", policy)
    assert nonce is not None and policy == page_csp(nonce[1])
    assert "frame-ancestors 'none'" in policy and "'self'" not in policy.split(";")[1]
    tags = re.findall(r"<script [^>]*>", page.text)
    assert len(tags) == 5 and all(f'nonce="{nonce[1]}"' in tag for tag in tags)
    again = client.get("/console/").headers["content-security-policy"]
    assert again != policy  # a nonce per load
    assert "script-src 'none'" in CSP
    assert page.headers["content-disposition"] == "inline"
    assert page.headers["x-frame-options"] == "DENY"
    assets = re.findall(r'(?:src|href)="(assets/[^"]+)"', page.text)
    assert assets and all(re.search(r"\.[0-9a-f]{12}\.(js|css)$", name) for name in assets)
    for name in assets:
        asset = client.get(f"/console/{name}")
        assert asset.status_code == 200
        assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert asset.headers["content-security-policy"] == CSP
        assert asset.headers["content-disposition"] == "inline"
    assert "<script>" not in page.text.replace(" ", "")  # no inline script: the CSP forbids it


def test_an_asset_of_another_version_or_outside_the_folder_is_not_found(client: TestClient) -> None:
    for name in ("console.000000000000.js", "console.js", "..%2Fstatic%2Findex.html", "%2e%2e"):
        answer = client.get(f"/console/assets/{name}")
        assert answer.status_code == 404, name
        assert "default-src 'none'" in answer.headers["content-security-policy"]


def test_the_console_path_without_its_slash_redirects(client: TestClient) -> None:
    answer = client.get("/console", follow_redirects=False)
    assert answer.status_code == 308 and answer.headers["location"] == "/console/"


def test_the_console_is_off_unless_turned_on(backend: Backend) -> None:
    with TestClient(create_app(backend.settings, backend.store)) as plain:
        assert plain.get("/console/").status_code == 404
        assert plain.get("/console/api/session").status_code == 404


def test_a_console_path_elsewhere_serves_there(backend: Backend) -> None:
    with _app(backend, console_path="/ops/ui") as moved:
        assert moved.get("/ops/ui/").status_code == 200
        assert moved.get("/ops/ui/api/session").json()["console_path"] == "/ops/ui"
        assert moved.get("/console/").status_code == 404


@pytest.mark.parametrize(
    ("path", "base"),
    [
        ("console", "/v1/stream"),
        ("/console/", "/v1/stream"),
        ("/v1/stream/ui", "/v1/stream"),
        ("/v1", "/v1/stream"),
        ("/healthz", "/v1/stream"),
        ("/a b", "/v1/stream"),
        ("/console", ""),  # streams at the root: the console would hide some
    ],
)
def test_a_console_path_that_cannot_work_is_refused_at_start(path: str, base: str) -> None:
    with pytest.raises(SettingsError, match="DS_CONSOLE"):
        load_settings(console=True, console_path=path, base_path=base)
    # Without the console, its path is nobody's concern.
    assert load_settings(console=False, console_path=path, base_path=base).base_path == base


# ---------------------------------------------------------------------- session


def test_without_access_control_the_session_allows_everything(client: TestClient) -> None:
    session = client.get("/console/api/session").json()
    assert session["auth"] is False and session["listing"] is True
    assert session["grants"] == ["append,consume,create,delete,fork,operate,read:*"]
    assert session["base_path"] == ROOT


def test_the_session_shows_what_a_token_grants_and_refuses_a_bad_one(secured: TestClient) -> None:
    anonymous = secured.get("/console/api/session")
    assert anonymous.status_code == 200
    assert anonymous.json()["authenticated"] is False and anonymous.json()["grants"] == []
    reader = token("read:chat/")
    session = secured.get("/console/api/session", headers=bearer(reader))
    assert session.json()["authenticated"] is True
    assert session.json()["grants"] == ["read:chat/"]
    # A list claim's entries keep their spaces: each grant is shown whole.
    payload = {"aud": AUDIENCE, "exp": int(time.time()) + 600, "scope": ["read,append:my room/"]}
    spaced = jwt.encode(payload, CURRENT_SECRET, algorithm="HS256", headers={"kid": CURRENT_KID})
    grants = secured.get("/console/api/session", headers=bearer(spaced)).json()["grants"]
    assert grants == ["append,read:my room/"]
    assert reader not in session.text
    bad = secured.get("/console/api/session", headers=bearer(reader[:-4] + "AAAA"))
    assert bad.status_code == 401 and bad.json()["error"] == "unauthorized"
    assert bad.headers["cache-control"] == "no-store"


# ---------------------------------------------------------------------- streams


def test_the_list_shows_each_streams_metadata(client: TestClient) -> None:
    _make(client, "chat/1", {"a": 1}, {"b": 2})
    _make(client, "chat/2", headers={"Stream-TTL": "3600"})
    assert client.put(f"{ROOT}/other", headers={"Content-Type": "text/plain"}).status_code == 201
    closed = client.post(f"{ROOT}/chat/2", headers={**JSON, "Stream-Closed": "true"})
    assert closed.status_code == 204
    answer = client.get("/console/api/streams", params={"prefix": "chat/"})
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    rows = {row["path"]: row for row in answer.json()["streams"]}
    assert set(rows) == {"chat/1", "chat/2"}
    first, second = rows["chat/1"], rows["chat/2"]
    assert first["content_type"] == "application/json" and first["bytes"] == 14
    assert first["closed"] is False and first["ttl_seconds"] is None
    assert first["last_activity"] is not None and first["tail_offset"].endswith("14")
    assert second["closed"] is True and second["ttl_seconds"] == 3600
    assert second["expires_at"] is not None and second["last_activity"] is None


def test_the_list_follows_its_cursor(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from durable_streams_aws.core.console import _api

    monkeypatch.setattr(_api, "PAGE_ITEMS", 2)
    for n in range(5):
        _make(client, f"page/{n}", n)
    seen, params = [], {"prefix": "page/"}
    for _ in range(50):
        answer = client.get("/console/api/streams", params=params).json()
        seen += [row["path"] for row in answer["streams"]]
        if answer["next"] is None:
            break
        params = {"prefix": "page/", "cursor": answer["next"]}
    assert sorted(seen) == [f"page/{n}" for n in range(5)]


@pytest.mark.parametrize(
    ("query", "status"),
    [({"cursor": "not-a-cursor"}, 400), ({"limit": "5"}, 400), ({"prefix": "a\x01"}, 400)],
)
def test_a_list_request_it_cannot_take_is_a_400(
    client: TestClient, query: dict[str, str], status: int
) -> None:
    answer = client.get("/console/api/streams", params=query)
    assert answer.status_code == status
    assert answer.json()["error"] == "bad_request" and answer.json()["message"]


def test_with_listing_off_the_list_says_how_to_turn_it_on(backend: Backend) -> None:
    with _app(backend, listing=False) as unlisted:
        answer = unlisted.get("/console/api/streams")
        assert answer.status_code == 404 and answer.json()["error"] == "listing_off"
        assert "DS_LISTING=true" in answer.json()["message"]
        assert unlisted.get("/console/api/session").json()["listing"] is False


def test_the_list_needs_what_a_listing_needs(secured: TestClient) -> None:
    assert secured.get("/console/api/streams").status_code == 401
    narrow = secured.get("/console/api/streams", headers=bearer(token("read:chat/")))
    assert narrow.status_code == 403
    wide = secured.get("/console/api/streams", headers=bearer(token("read:*")))
    assert wide.status_code == 200


# ---------------------------------------------------------------------- a stream's internals


def test_a_streams_internals_show_its_producers_and_sealing(client: TestClient) -> None:
    _make(client, "orders/1")
    for seq in range(3):
        headers = {
            **JSON,
            "Producer-Id": "writer-a",
            "Producer-Epoch": "2",
            "Producer-Seq": str(seq),
        }
        assert client.post(f"{ROOT}/orders/1", json=[seq], headers=headers).status_code in {
            200,
            204,
        }
    answer = client.get("/console/api/stream/orders/1")
    assert answer.status_code == 200
    internals = answer.json()
    assert internals["producers"] == [{"id": "writer-a", "epoch": 2, "last_seq": 2}]
    assert internals["bytes"] == 3 and internals["sealed_bytes"] == 0
    assert internals["sealed_share"] == 0.0 and internals["forked_from"] is None
    assert client.get("/console/api/stream/orders/none").status_code == 404
    assert client.get("/console/api/stream/orders/%2E%2E").status_code == 400


def test_a_recreated_stream_shows_none_of_its_predecessors_producers(client: TestClient) -> None:
    _make(client, "again")
    headers = {**JSON, "Producer-Id": "old", "Producer-Epoch": "0", "Producer-Seq": "0"}
    client.post(f"{ROOT}/again", json=[1], headers=headers)
    assert client.delete(f"{ROOT}/again").status_code == 204
    _make(client, "again")
    assert client.get("/console/api/stream/again").json()["producers"] == []


def test_forks_are_listed_with_their_age(client: TestClient) -> None:
    _make(client, "base", 1, 2)
    fork = client.put(f"{ROOT}/fork-1", headers={"Stream-Forked-From": f"{ROOT}/base"})
    assert fork.status_code == 201
    answer = client.get("/console/api/forks/base").json()
    assert answer["forks"] == ["fork-1"] and answer["age_seconds"] >= 0
    internals = client.get("/console/api/stream/fork-1").json()
    assert internals["forked_from"] == "base" and internals["fork_offset"] is not None
    assert client.get("/console/api/stream/base").json()["ref_count"] == 1


def test_forks_outside_what_the_token_may_see_are_counted_not_named(secured: TestClient) -> None:
    admin = bearer(token("read,append,create,delete,fork:*"))
    assert secured.put(f"{ROOT}/a/1", headers={**JSON, **admin}).status_code == 201
    for fork in ("a/fork", "secret/fork"):
        made = secured.put(f"{ROOT}/{fork}", headers={**admin, "Stream-Forked-From": f"{ROOT}/a/1"})
        assert made.status_code == 201
    narrow = secured.get("/console/api/forks/a/1", headers=bearer(token("operate:a/")))
    assert narrow.json()["forks"] == ["a/fork"] and narrow.json()["hidden"] == 1
    assert "secret" not in narrow.text
    wide = secured.get("/console/api/forks/a/1", headers=bearer(token("operate:a/ read:secret/")))
    assert wide.json()["forks"] == ["a/fork", "secret/fork"] and wide.json()["hidden"] == 0


def test_a_stream_nothing_forked_is_answered_without_a_scan(
    client: TestClient, backend: Backend
) -> None:
    _make(client, "lonely", 1)
    scans: list[dict[str, Any]] = []
    original = backend.store.dynamodb.scan

    def counted(**request: Any) -> Any:
        scans.append(request)
        return original(**request)

    backend.store.dynamodb.scan = counted
    try:
        answer = client.get("/console/api/forks/lonely")
        assert answer.status_code == 200 and answer.json()["forks"] == []
        assert client.get("/console/api/forks/nobody").status_code == 404
    finally:
        backend.store.dynamodb.scan = original
    assert scans == []


def test_operator_views_need_the_operate_grant(secured: TestClient) -> None:
    admin = bearer(token("read,append,create,delete:*"))
    assert secured.put(f"{ROOT}/chat/1", headers={**JSON, **admin}).status_code == 201
    for path in ("/console/api/stream/chat/1", "/console/api/forks/chat/1"):
        assert secured.get(path).status_code == 401
        assert secured.get(path, headers=admin).status_code == 403
        assert secured.get(path, headers=bearer(token("operate:other/"))).status_code == 403
        assert secured.get(path, headers=bearer(token("operate:chat/"))).status_code == 200
    for path in ("/console/api/overview", "/console/api/subscriptions"):
        assert secured.get(path, headers=bearer(token("operate:chat/"))).status_code == 403
        assert secured.get(path, headers=bearer(token("operate:*"))).status_code == 200
    refused = secured.get("/console/api/overview", headers=admin)
    assert "operate on every stream" in refused.json()["message"]
    assert refused.headers["content-security-policy"] == CSP


# ---------------------------------------------------------------------- overview


def test_the_overview_counts_appends_and_caches_the_stores_figures(client: TestClient) -> None:
    _make(client, "o/1", *range(7))
    first = client.get("/console/api/overview").json()
    series = first["rates"]["series"]
    assert sum(count for _, count in series["appends"]) == 7
    assert (
        sum(size for _, size in series["bytes_appended"])
        == 7  # one byte per message: JSON mode stores each without its array
    )
    assert first["rates"]["step_seconds"] == 5 and len(series["appends"]) == 180
    assert first["stored"]["streams"] == 1 and first["stored"]["bytes_inline"] > 0
    _make(client, "o/2")
    cached = client.get("/console/api/overview").json()
    assert cached["stored"]["streams"] == 1  # a minute's cache: no scan per page view
    assert cached["stored_as_of"] == first["stored_as_of"]
    assert sum(count for _, count in cached["rates"]["series"]["appends"]) == 7


def test_rates_that_cannot_be_read_leave_the_rest_of_the_overview(backend: Backend) -> None:
    class Refusing:  # CloudWatch refusing the role, or throttling
        cache_seconds = 0.0

        def rates(self) -> Any:
            raise PermissionError("AccessDenied")

    async def admit(*_: Any) -> Any:
        return OPEN

    app = FastAPI()
    settings = backend.settings.model_copy(update={"console": True})
    add_console(app, settings, backend.store, admit, None, Refusing(), None)
    with TestClient(app) as alone:
        answer = alone.get("/console/api/overview")
    assert answer.status_code == 200
    assert answer.json()["rates"] == {"error": "the rates could not be read: PermissionError"}
    assert answer.json()["stored"]["streams"] == 0


# ---------------------------------------------------------------------- subscriptions


def test_subscriptions_show_each_link_behind_its_tail_and_the_wake(client: TestClient) -> None:
    _make(client, "jobs/1", {"n": 0})
    _make(client, "jobs/2")
    _make(client, "wake/pool")
    config = {"type": "pull-wake", "pattern": "jobs/*", "wake_stream": "wake/pool"}
    created = client.put(f"{ROOT}/__ds/subscriptions/workers", json=config)
    assert created.status_code == 201, created.text
    for n in (1, 2):  # after the subscription's start: behind it
        assert client.post(f"{ROOT}/jobs/1", json=[{"n": n}], headers=JSON).status_code == 204
    answer = client.get("/console/api/subscriptions")
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    assert answer.json()["total"] == 1
    (subscription,) = answer.json()["subscriptions"]
    assert subscription["id"] == "workers" and subscription["type"] == "pull-wake"
    assert subscription["wake_stream"] == "wake/pool" and subscription["failed_attempts"] == 0
    links = {link["path"]: link for link in subscription["links"]}
    assert links["jobs/1"]["behind_bytes"] == 14 and links["jobs/1"]["has_pending"] is True
    assert links["jobs/2"]["behind_bytes"] == 0 and links["jobs/2"]["has_pending"] is False
    # The wake is issued by the in-process worker, just after the append's notice.
    deadline = time.monotonic() + 10
    while subscription["wake"] is None and time.monotonic() < deadline:
        time.sleep(0.05)
        (subscription,) = client.get("/console/api/subscriptions").json()["subscriptions"]
    wake = subscription["wake"]
    assert wake is not None and wake["streams"] == 1 and wake["holder"] is None
    assert wake["issued_at"] is not None and wake["id"]


def test_with_subscriptions_off_the_page_is_told(backend: Backend) -> None:
    with _app(backend, subscriptions=False) as off:
        answer = off.get("/console/api/subscriptions")
        assert answer.status_code == 404 and answer.json()["error"] == "subscriptions_off"
