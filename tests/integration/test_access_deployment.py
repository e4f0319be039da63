"""Access control as a deployment configures it: who may cache what, the locked origin, CORS,
and the keys read from Secrets Manager or SSM (through Powertools, cached)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from auth_support import KEY_SET_TEXT, KEYS, ORIGIN_SECRET, admin, bearer
from starlette.testclient import TestClient

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.auth import (
    ORIGIN_SECRET_HEADER,
    mint_token,
    parse_grants,
    parse_key_set,
    sign,
)
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.infra.emulator import Emulator

ROOT = "/v1/stream/"
TEXT = {"Content-Type": "text/plain"}


def secured_app(backend: Backend, **settings: Any) -> TestClient:
    options = {"auth": True, "auth_secret": KEY_SET_TEXT, "public_read_prefixes": "public/"}
    configured = backend.settings.model_copy(update={**options, **settings})
    return TestClient(create_app(configured, backend.store))


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    with secured_app(backend) as test_client:
        yield test_client


def _closed_stream(client: TestClient, path: str) -> None:
    headers = {**TEXT, **admin(), "Stream-Closed": "true"}
    assert client.put(ROOT + path, headers=headers, content=b"done").status_code == 201


def test_shared_caches_keep_public_and_signed_reads_but_never_token_reads(
    client: TestClient,
) -> None:
    _closed_stream(client, "public/news")
    _closed_stream(client, "private/report")
    public = client.get(ROOT + "public/news", params={"offset": "-1"})
    assert public.headers["cache-control"].startswith("public, max-age=60")
    mine = client.get(ROOT + "private/report", params={"offset": "-1"}, headers=admin())
    assert mine.status_code == 200
    assert mine.headers["cache-control"].startswith("private, max-age=60")
    # A signed URL valid 40 more seconds: cached publicly, never past its expiry.
    expires = int(time.time()) + 40
    signed = sign(KEYS, "private/report", expires)
    read = client.get(ROOT + "private/report", params={"offset": "-1", **signed})
    assert read.status_code == 200 and read.content == b"done"
    control = read.headers["cache-control"]
    max_age = int(control.split("max-age=")[1].split(",")[0])
    swr = int(control.split("stale-while-revalidate=")[1])
    assert control.startswith("public") and 0 < max_age + swr <= 40


def test_a_locked_origin_answers_only_requests_through_the_cdn(backend: Backend) -> None:
    locked = {"origin_lock": "all", "origin_secret": f"{ORIGIN_SECRET},next-origin-secret-01"}
    with secured_app(backend, **locked) as client:
        cdn = {ORIGIN_SECRET_HEADER: ORIGIN_SECRET}
        direct = client.put(ROOT + "private/a", headers={**TEXT, **admin()})
        assert direct.status_code == 403 and direct.json()["error"] == "forbidden"
        assert client.get(ROOT + "public/x").status_code == 403
        wrong = {ORIGIN_SECRET_HEADER: ORIGIN_SECRET + "x"}
        assert client.get(ROOT + "public/x", headers=wrong).status_code == 403
        assert client.put(ROOT + "private/a", headers={**TEXT, **admin(), **cdn}).status_code == 201
        # During a rotation both values are accepted.
        rotated = {ORIGIN_SECRET_HEADER: "next-origin-secret-01"}
        assert client.head(ROOT + "private/a", headers={**admin(), **rotated}).status_code == 200
        assert client.get("/healthz").status_code == 200
    with secured_app(backend, origin_lock="reads", origin_secret=ORIGIN_SECRET) as client:
        # Writers may call the function directly; readers must come through the CDN.
        appended = client.post(ROOT + "private/a", headers={**TEXT, **admin()}, content=b"x")
        assert appended.status_code == 204
        assert (
            client.get(ROOT + "private/a", params={"offset": "-1"}, headers=admin()).status_code
            == 403
        )


def test_cors_allows_the_configured_origins_and_never_credentials(backend: Backend) -> None:
    with secured_app(backend, cors_origins="https://app.example") as client:
        preflight = {
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        }
        allowed = client.options(ROOT + "private/a", headers=preflight)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        assert "access-control-allow-credentials" not in allowed.headers
        evil = client.options(ROOT + "private/a", headers={**preflight, "Origin": "https://evil"})
        assert evil.headers.get("access-control-allow-origin") is None
        read = client.get(ROOT + "public/x", headers={"Origin": "https://evil"})
        assert read.headers.get("access-control-allow-origin") is None
        refused = client.get(ROOT + "private/x", headers={"Origin": "https://app.example"})
        assert refused.status_code == 401  # and the browser may read why:
        assert refused.headers["access-control-allow-origin"] == "https://app.example"
        assert "WWW-Authenticate" in refused.headers["access-control-expose-headers"]
    with secured_app(backend) as client:  # any origin: never credentials, whatever is asked
        answer = client.options(
            ROOT + "private/a",
            headers={
                "Origin": "https://anyone.example",
                "Access-Control-Request-Method": "GET",
                "Cookie": "session=1",
            },
        )
        assert answer.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in answer.headers


@pytest.fixture
def powertools_on_emulator(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("AWS_ENDPOINT_URL", emulator.endpoint)
    clients = {
        "secretsmanager": boto3.client("secretsmanager", endpoint_url=emulator.endpoint),
        "ssm": boto3.client("ssm", endpoint_url=emulator.endpoint),
    }
    yield clients


NEW_KEYS = '{"keys": [{"kid": "2027-01", "secret": "' + "n" * 40 + '"}]}'


def _store(clients: dict[str, Any], store: str, name: str, value: str, *, first: bool) -> dict:
    """Put `value` in Secrets Manager or SSM; the settings that name it."""
    if store == "secretsmanager":
        if first:
            arn = clients[store].create_secret(Name=name, SecretString=value)["ARN"]
            return {"auth_secret_id": arn}
        clients[store].put_secret_value(SecretId=name, SecretString=value)
        return {}
    clients[store].put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)
    return {"auth_secret_parameter": name}


@pytest.mark.parametrize("store", ["secretsmanager", "ssm"])
def test_keys_are_read_once_per_max_age_and_a_rotation_is_picked_up(
    backend: Backend, powertools_on_emulator: dict[str, Any], store: str
) -> None:
    name = f"dsaws-keys-{backend.settings.table}"
    where = _store(powertools_on_emulator, store, name, KEY_SET_TEXT, first=True)
    fresh = mint_token(
        parse_key_set(NEW_KEYS), parse_grants("read:*"), lifetime=60, audience="durable-streams"
    )
    with secured_app(backend, auth_secret=None, auth_keys_max_age=1, **where) as client:
        path = ROOT + "private/k"
        assert client.put(path, headers={**TEXT, **admin()}).status_code == 201
        _store(powertools_on_emulator, store, name, NEW_KEYS, first=False)
        # Within max_age the keys are not read again: the old key still verifies.
        assert client.head(path, headers=admin()).status_code == 200
        assert client.head(path, headers=bearer(fresh)).status_code == 401
        time.sleep(1.2)
        assert client.head(path, headers=admin()).status_code == 401
        assert client.head(path, headers=bearer(fresh)).status_code == 200
        # A rotation that stores something unusable keeps the last good keys (and logs it).
        _store(powertools_on_emulator, store, name, "too short", first=False)
        time.sleep(1.2)
        assert client.head(path, headers=bearer(fresh)).status_code == 200


def test_the_origin_secret_comes_from_secrets_manager_with_its_previous_value(
    backend: Backend, powertools_on_emulator: dict[str, Any]
) -> None:
    manager = powertools_on_emulator["secretsmanager"]
    old, new = "origin-old-0123456789", "origin-new-0123456789"
    secret = manager.create_secret(
        Name=f"origin-{backend.settings.table}",
        SecretString=json.dumps({"current": new, "previous": old}),
    )
    locked = {"origin_lock": "all", "origin_secret_id": secret["ARN"]}
    with secured_app(backend, **locked) as client:
        for value, status in [(new, 401), (old, 401), ("origin-other-0123456789", 403)]:
            answer = client.get(ROOT + "private/x", headers={ORIGIN_SECRET_HEADER: value})
            assert answer.status_code == status  # 401: past the lock, then no token
        assert client.get(ROOT + "private/x").status_code == 403


def test_cache_key_parameters_must_be_spelled_literally_on_every_request(
    client: TestClient,
) -> None:
    """`%73ignature` is `signature` to the server but no key parameter to a CDN: such a signed
    read would be stored under the key of an anonymous read of the same stream."""
    _closed_stream(client, "private/secret")
    signed = sign(KEYS, "private/secret", int(time.time()) + 60)
    spelled = "&".join(f"%{ord(name[0]):02X}{name[1:]}={value}" for name, value in signed.items())
    for method in ("GET", "HEAD", "POST", "DELETE"):
        answer = client.request(method, f"{ROOT}private/secret?offset=-1&{spelled}")
        assert answer.status_code == 400, method
    assert client.get(f"{ROOT}private/secret?offset=-1").status_code == 401
    repeated = {**signed, "offset": "-1"}
    query = "&".join(f"{k}={v}" for k, v in repeated.items()) + f"&signature={signed['signature']}"
    answer = client.get(f"{ROOT}private/secret?{query}")
    assert answer.status_code == 403 and "repeated" in answer.json()["message"]


def test_refusals_of_head_requests_have_no_body(client: TestClient) -> None:
    answer = client.head(ROOT + "private/none")
    assert answer.status_code == 401 and answer.content == b""
    assert "content-length" not in answer.headers or answer.headers["content-length"] == "0"
    assert answer.headers["www-authenticate"].startswith("Bearer")
