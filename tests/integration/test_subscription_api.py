"""The `__ds` control API over HTTP: hostile input is refused with 4xx and changes nothing,
and access control asks for what a subscription can reach."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from auth_support import KEY_SET_TEXT, bearer, token
from starlette.testclient import TestClient

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.http.subscriptions import MAX_CONTROL_BODY_BYTES
from durable_streams_aws.core.runtime import Backend

SUBS = "/v1/stream/__ds/subscriptions"
HOOK = {"type": "webhook", "pattern": "jobs/*", "webhook": {"url": "https://hooks.example/x"}}


def _app(backend: Backend, **settings: Any) -> TestClient:
    configured = backend.settings.model_copy(
        update={"webhook_secret": "api tests", "webhook_allow_localhost": False, **settings}
    )
    return TestClient(create_app(configured, backend.store))


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    with _app(backend) as client:
        yield client


def _stored(backend: Backend) -> list[dict[str, Any]]:
    table = backend.settings.table
    return sorted(
        backend.dynamodb.scan(TableName=table, ConsistentRead=True)["Items"],
        key=lambda item: (item["pk"]["S"], item["sk"]["S"]),
    )


HOSTILE_BODIES = [
    b"[" * 100_000,  # nesting deeper than the parser's recursion
    b'{"type": "webhook", "pattern": "jobs/*", "webhook": {"url": "https://h.example/\\ud800"}}',
    json.dumps({**HOOK, "description": "\ud800"}).encode(),
    json.dumps({**HOOK, "streams": ["s" * 1000 + str(i) for i in range(200)]}).encode(),
    json.dumps({**HOOK, "lease_ttl_ms": 10**100}).encode(),
    json.dumps({**HOOK, "webhook": {"url": "https://[fe80::1%25eth0]/x"}}).encode(),
    b"\xff\xfe",
    b"",
    json.dumps({**HOOK, "description": "d" * 300_000}).encode(),  # past the body limit
]


def test_hostile_subscription_bodies_are_refused_and_change_nothing(
    client: TestClient, backend: Backend
) -> None:
    assert client.put(f"{SUBS}/kept", json=HOOK).status_code == 201
    before = _stored(backend)
    for body in HOSTILE_BODIES:
        for method, url in [
            ("PUT", f"{SUBS}/new"),
            ("PUT", f"{SUBS}/kept"),
            ("POST", f"{SUBS}/kept/streams"),
            ("POST", f"{SUBS}/kept/claim"),
            ("POST", f"{SUBS}/kept/callback"),
            ("POST", f"{SUBS}/kept/ack"),
            ("POST", f"{SUBS}/kept/release"),
        ]:
            response = client.request(method, url, content=body)
            assert 400 <= response.status_code < 500, (method, url, body[:40], response.text)
            assert response.json()["error"]["code"]
    assert _stored(backend) == before


def test_a_subscription_reads_with_every_field_null_where_it_does_not_apply(
    client: TestClient,
) -> None:
    client.put(f"{SUBS}/hook", json=HOOK)
    document = client.get(f"{SUBS}/hook").json()
    assert document["wake_stream"] is None and document["description"] is None
    assert document["pattern"] == "jobs/*" and document["webhook"]["url"] == HOOK["webhook"]["url"]
    pull = {"type": "pull-wake", "streams": ["a/b"], "wake_stream": "wake/pool"}
    client.put(f"{SUBS}/pull", json=pull)
    document = client.get(f"{SUBS}/pull").json()
    assert document["webhook"] is None and document["pattern"] is None
    assert document["wake_stream"] == "wake/pool"


def test_a_body_past_the_limit_is_refused_before_it_is_read_whole(client: TestClient) -> None:
    client.put(f"{SUBS}/kept", json=HOOK)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies as it arrives
        yield from (b" " * 65_536 for _ in range(16))

    for method, url in [("PUT", f"{SUBS}/new"), ("POST", f"{SUBS}/kept/callback")]:
        for body in (b" " * (MAX_CONTROL_BODY_BYTES + 1), chunks()):
            response = client.request(method, url, content=body)
            assert response.status_code == 413, response.text
            assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", f"{SUBS}/%FF", 400),  # not UTF-8: never the same id as %FE
        ("GET", f"{SUBS}/absent", 404),
        ("DELETE", f"{SUBS}/absent", 404),
        ("POST", f"{SUBS}/absent/claim", 400),  # no worker named
        ("GET", "/v1/stream/__ds/anything", 404),
        ("POST", f"{SUBS}/kept/callback", 401),  # no token
        ("HEAD", f"{SUBS}/kept", 200),
        ("HEAD", "/v1/stream/__ds/jwks.json", 200),
        ("PATCH", f"{SUBS}/kept", 405),
    ],
)
def test_unknown_and_malformed_control_requests(
    client: TestClient, method: str, path: str, status: int
) -> None:
    client.put(f"{SUBS}/kept", json=HOOK)
    response = client.request(method, path, content=b"{}")
    assert response.status_code == status, response.text
    if status == 405:
        assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    if method == "HEAD":
        assert response.content == b"" and response.headers["content-type"]


def test_explicit_streams_are_bounded_in_all(client: TestClient, backend: Backend) -> None:
    assert client.put(f"{SUBS}/big", json={**HOOK, "streams": ["a"]}).status_code == 201
    batch = [f"{'p' * 900}/{i}" for i in range(60)]  # about 54 KB a request
    assert client.post(f"{SUBS}/big/streams", json={"streams": batch}).status_code == 204
    more = [f"{'q' * 900}/{i}" for i in range(60)]
    assert client.post(f"{SUBS}/big/streams", json={"streams": more}).status_code == 204
    before = _stored(backend)
    too_many = [f"{'r' * 900}/{i}" for i in range(60)]
    refused = client.post(f"{SUBS}/big/streams", json={"streams": too_many})
    assert refused.status_code == 400 and "bytes" in refused.json()["error"]["message"]
    assert _stored(backend) == before
    assert client.get(f"{SUBS}/big").status_code == 200


def test_what_each_control_request_needs(backend: Backend) -> None:
    with _app(backend, auth=True, auth_secret=KEY_SET_TEXT) as client:
        pull = {"type": "pull-wake", "pattern": "jobs/*", "wake_stream": "victim/log"}
        reader = bearer(token("read:*"))
        creator = bearer(token("read,create:*"))
        # Reading every stream is not enough to make a subscription...
        assert client.put(f"{SUBS}/w", json=HOOK, headers=reader).status_code == 403
        assert client.put(f"{SUBS}/w", json=HOOK, headers=creator).status_code == 201
        # ...and one that writes wake events needs append on its wake stream.
        assert client.put(f"{SUBS}/p", json=pull, headers=creator).status_code == 403
        appender = bearer(token("read,create:* append:victim/log"))
        assert client.put(f"{SUBS}/p", json=pull, headers=appender).status_code == 201
        # Reading a subscription needs read on every stream (its webhook URL is shown only
        # to those who may change it); claiming its wakes needs consume as well.
        seen = client.get(f"{SUBS}/w", headers=reader)
        assert seen.status_code == 200 and seen.json()["webhook"]["url"] is None
        full = client.get(f"{SUBS}/w", headers=creator)
        assert full.json()["webhook"]["url"] == HOOK["webhook"]["url"]
        assert client.get(f"{SUBS}/w", headers=bearer(token("read:jobs/"))).status_code == 403
        assert client.get(f"{SUBS}/w").status_code == 401
        claim = client.post(f"{SUBS}/p/claim", json={"worker": "w"}, headers=reader)
        assert claim.status_code == 403
        consumer = bearer(token("read,consume:*"))
        claim = client.post(f"{SUBS}/p/claim", json={"worker": "w"}, headers=consumer)
        assert claim.json()["error"]["code"] == "NO_PENDING_WORK"
        # Removing one is a change: read alone does not do it.
        assert client.delete(f"{SUBS}/w", headers=reader).status_code == 403
        assert client.delete(f"{SUBS}/w", headers=creator).status_code == 204
        # The signing keys are public.
        assert client.get("/v1/stream/__ds/jwks.json").status_code == 200


def test_a_write_that_keeps_losing_its_race_is_answered_503(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The optimistic write is bounded: past its tries, the client is told to come back."""
    from durable_streams_aws.core.storage.aws import Conflict

    assert client.put(f"{SUBS}/busy", json=HOOK).status_code == 201
    store = client.app.state.subscriptions.store  # type: ignore[attr-defined]
    tries = []

    def always_loses(*args: Any) -> None:
        tries.append(1)
        raise Conflict("lost a race")

    monkeypatch.setattr(store, "replace", always_loses)
    response = client.delete(f"{SUBS}/busy")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert response.json() == {
        "error": {"code": "UNAVAILABLE", "message": "storage is busy; retry shortly"}
    }
    assert len(tries) == 64
    monkeypatch.undo()
    assert client.get(f"{SUBS}/busy").status_code == 200  # nothing was written


def test_a_put_answers_201_created_200_confirmed_and_409_for_another_config(
    client: TestClient,
) -> None:
    """The route maps the service's `Creation` outcome onto the status."""
    created = client.put(f"{SUBS}/once", json=HOOK)
    assert created.status_code == 201 and created.json()["id"] == "once"
    confirmed = client.put(f"{SUBS}/once", json=HOOK)
    assert confirmed.status_code == 200 and confirmed.json() == created.json()
    other = client.put(f"{SUBS}/once", json={**HOOK, "pattern": "jobs/**"})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "SUBSCRIPTION_ALREADY_EXISTS"
