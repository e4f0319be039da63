"""Access control as a deployment configures it: who may cache what, the locked origin, CORS,
and the keys read from Secrets Manager or SSM (through Powertools, cached)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from auth_support import ALL_ACTIONS, KEY_SET_TEXT, KEYS, ORIGIN_SECRET, bearer, token
from aws_lambda_powertools.utilities import parameters
from starlette.testclient import TestClient

from core.app import create_app
from core.auth import ORIGIN_SECRET_HEADER, mint_token, parse_grants, parse_key_set, sign
from core.runtime import Backend
from infra.emulator import Emulator

ROOT = "/v1/stream/"
ADMIN = bearer(token(f"{ALL_ACTIONS}:*"))
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
    headers = {**TEXT, **ADMIN, "Stream-Closed": "true"}
    assert client.put(ROOT + path, headers=headers, content=b"done").status_code == 201


def test_shared_caches_keep_public_and_signed_reads_but_never_token_reads(
    client: TestClient,
) -> None:
    _closed_stream(client, "public/news")
    _closed_stream(client, "private/report")
    public = client.get(ROOT + "public/news", params={"offset": "-1"})
    assert public.headers["cache-control"].startswith("public, max-age=60")
    mine = client.get(ROOT + "private/report", params={"offset": "-1"}, headers=ADMIN)
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
        direct = client.put(ROOT + "private/a", headers={**TEXT, **ADMIN})
        assert direct.status_code == 403 and direct.json()["error"] == "forbidden"
        assert client.get(ROOT + "public/x").status_code == 403
        wrong = {ORIGIN_SECRET_HEADER: ORIGIN_SECRET + "x"}
        assert client.get(ROOT + "public/x", headers=wrong).status_code == 403
        assert client.put(ROOT + "private/a", headers={**TEXT, **ADMIN, **cdn}).status_code == 201
        # During a rotation both values are accepted.
        rotated = {ORIGIN_SECRET_HEADER: "next-origin-secret-01"}
        assert client.head(ROOT + "private/a", headers={**ADMIN, **rotated}).status_code == 200
        assert client.get("/healthz").status_code == 200
    with secured_app(backend, origin_lock="reads", origin_secret=ORIGIN_SECRET) as client:
        # Writers may call the function directly; readers must come through the CDN.
        appended = client.post(ROOT + "private/a", headers={**TEXT, **ADMIN}, content=b"x")
        assert appended.status_code == 204
        assert (
            client.get(ROOT + "private/a", params={"offset": "-1"}, headers=ADMIN).status_code
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
    parameters.clear_caches()
    parameters.base.DEFAULT_PROVIDERS.clear()
    clients = {
        "secretsmanager": boto3.client("secretsmanager", endpoint_url=emulator.endpoint),
        "ssm": boto3.client("ssm", endpoint_url=emulator.endpoint),
    }
    yield clients
    parameters.clear_caches()
    parameters.base.DEFAULT_PROVIDERS.clear()


NEW_KEYS = '{"keys": [{"kid": "2027-01", "secret": "' + "n" * 40 + '"}]}'


@pytest.mark.parametrize("store", ["secretsmanager", "ssm"])
def test_keys_come_from_the_store_once_and_a_rotation_is_picked_up_after_max_age(
    backend: Backend, powertools_on_emulator: dict[str, Any], store: str
) -> None:
    name = f"dsaws-keys-{backend.settings.table}"
    if store == "secretsmanager":
        created = powertools_on_emulator[store].create_secret(Name=name, SecretString=KEY_SET_TEXT)
        where = {"auth_secret_id": created["ARN"]}
    else:
        powertools_on_emulator[store].put_parameter(
            Name=name, Value=KEY_SET_TEXT, Type="SecureString"
        )
        where = {"auth_secret_parameter": name}
    with secured_app(backend, auth_secret=None, **where) as client:
        path = ROOT + "private/k"
        assert client.put(path, headers={**TEXT, **ADMIN}).status_code == 201
        if store == "secretsmanager":
            powertools_on_emulator[store].put_secret_value(SecretId=name, SecretString=NEW_KEYS)
        else:
            powertools_on_emulator[store].put_parameter(
                Name=name, Value=NEW_KEYS, Type="SecureString", Overwrite=True
            )
        # Cached: the old key still verifies, and nothing was read again.
        assert client.head(path, headers=ADMIN).status_code == 200
        parameters.clear_caches()  # as max_age passing does
        assert client.head(path, headers=ADMIN).status_code == 401
        fresh = mint_token(
            parse_key_set(NEW_KEYS), parse_grants("read:*"), lifetime=60, audience="durable-streams"
        )
        assert client.head(path, headers=bearer(fresh)).status_code == 200
