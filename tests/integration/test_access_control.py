"""Access control end to end: every endpoint and method against every kind of bad credential,
then a good one. A refusal is 401 or 403 with a short JSON body (and `WWW-Authenticate` where a
bearer token could help), costs no AWS call, and leaves the table and the bucket as they were.

Run with `-s` to see the refusal table (the closing note of issue 12 carries it)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from auth_support import (
    ALL_ACTIONS,
    KEY_SET_TEXT,
    KEYS,
    admin,
    alg_none,
    bearer,
    expired,
    tampered,
    token,
    unknown_kid,
    wrong_algorithm,
)
from starlette.testclient import TestClient

from benchmarks.aws_calls import CallMeter
from core.app import create_app
from core.auth import round_expiry, sign
from core.runtime import Backend

ROOT = "/v1/stream/"


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    need: str  # the action whose absence the "missing action" column tests
    ok: int  # the status a valid token gets
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    listing: bool = False
    creates: bool = False  # the request names a new stream (PUT), not the seeded one

    @property
    def reads(self) -> bool:
        return self.method in {"GET", "HEAD"}

    def path(self, row: int) -> str:
        if self.listing:
            return ""
        return f"private/row{row}" + ("-new" if self.creates else "")


PRODUCER = {"Producer-Id": "p1", "Producer-Epoch": "0", "Producer-Seq": "0"}
TEXT = {"Content-Type": "text/plain"}
ENDPOINTS = [
    Endpoint("GET catch-up", "GET", "read", 200, {"offset": "-1"}),
    Endpoint("GET long-poll", "GET", "read", 204, {"offset": "now", "live": "long-poll"}),
    Endpoint("GET sse", "GET", "read", 200, {"offset": "-1", "live": "sse"}),
    Endpoint("HEAD", "HEAD", "read", 200),
    Endpoint("PUT create", "PUT", "create", 201, headers=TEXT, creates=True),
    Endpoint("POST append", "POST", "append", 204, headers=TEXT, body=b"more"),
    Endpoint("POST producer", "POST", "append", 200, headers={**TEXT, **PRODUCER}, body=b"p"),
    Endpoint("POST close", "POST", "append", 204, headers={"Stream-Closed": "true"}),
    Endpoint("DELETE", "DELETE", "delete", 204),
    Endpoint("PUT fork", "PUT", "read", 201, creates=True),  # fork: needs read on the source
    # A listing needs read on every stream, whatever its prefix: its cursors name table keys.
    Endpoint("GET listing", "GET", "read", 200, {"prefix": "private/"}, listing=True),
]


@dataclass(frozen=True)
class Credential:
    name: str
    # (endpoint, path) -> (extra headers, extra query parameters)
    present: Callable[[Endpoint, str], tuple[dict[str, str], dict[str, str]]]


def _token(
    mint: Callable[[str], str],
) -> Callable[[Endpoint, str], tuple[dict[str, str], dict[str, str]]]:
    """A token minted for the scope the endpoint needs (a listing needs every stream)."""
    return lambda endpoint, path: (bearer(mint(_scope(endpoint))), {})


def _scope(endpoint: Endpoint, actions: str = ALL_ACTIONS) -> str:
    return f"{actions}:{'*' if endpoint.listing else 'private/'}"


def _without(endpoint: Endpoint, path: str) -> tuple[dict[str, str], dict[str, str]]:
    others = ",".join(a for a in ALL_ACTIONS.split(",") if a != endpoint.need)
    return bearer(token(_scope(endpoint, others))), {}


def _signed(target: str | None, *, later: int = 0, prefix: bool = False) -> Any:
    def present(endpoint: Endpoint, path: str) -> tuple[dict[str, str], dict[str, str]]:
        expires = round_expiry(time.time(), 600, 300)
        if endpoint.listing:
            params = sign(KEYS, target or "*", expires, prefix=True)
        else:
            params = sign(KEYS, target or path, expires, prefix=prefix)
        if later:
            params["expires"] = str(expires + later)
        return {}, params

    return present


CREDENTIALS = [
    Credential("none", lambda e, p: ({}, {})),
    Credential("expired", _token(expired)),
    Credential("other prefix", lambda e, p: (bearer(token(f"{ALL_ACTIONS}:other/")), {})),
    Credential("no action", _without),
    Credential("tampered", _token(lambda scope: tampered("read:public/", scope))),
    Credential("alg none", _token(alg_none)),
    Credential("HS512", _token(wrong_algorithm)),
    Credential("unknown kid", _token(unknown_kid)),
    Credential("wrong aud", _token(lambda scope: token(scope, audience="another-service"))),
    Credential("URL other path", _signed("private/elsewhere")),
    Credential("URL expiry+300", _signed(None, later=300)),
    Credential("URL valid", _signed(None)),
    Credential("token valid", _token(token)),
]


def expected_status(endpoint: Endpoint, credential: str) -> int:
    if credential == "token valid":
        return endpoint.ok
    if credential == "URL valid":
        return endpoint.ok if endpoint.reads else 403
    if credential in {"other prefix", "no action", "URL other path", "URL expiry+300"}:
        return 403
    return 401


@pytest.fixture
def secured(backend: Backend) -> Iterator[tuple[TestClient, CallMeter]]:
    settings = backend.settings.model_copy(
        update={
            "auth": True,
            "auth_secret": KEY_SET_TEXT,
            "public_read_prefixes": "public/",
            "listing": True,
            "long_poll_timeout": 0.2,
            "sse_mode": "window",
            "sse_window": 0.2,
        }
    )
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    meter.attach(backend.s3)
    with TestClient(create_app(settings, backend.store)) as client:
        yield client, meter


def _stored(backend: Backend) -> tuple[list[Any], list[Any]]:
    items = backend.dynamodb.scan(TableName=backend.settings.table, ConsistentRead=True)["Items"]
    objects = backend.s3.list_objects_v2(Bucket=backend.settings.bucket).get("Contents", [])
    return (
        sorted(items, key=lambda item: (item["pk"]["S"], item["sk"]["S"])),
        sorted((o["Key"], o["ETag"]) for o in objects),
    )


def _send(
    client: TestClient, endpoint: Endpoint, row: int, headers: dict[str, str], params: dict
) -> Any:
    path = endpoint.path(row)
    extra = dict(endpoint.headers)
    if endpoint.name == "PUT fork":
        extra["Stream-Forked-From"] = f"{ROOT}private/row{row}"
    url = ROOT.rstrip("/") if endpoint.listing else ROOT + path
    return client.request(
        endpoint.method,
        url,
        params={**endpoint.params, **params},
        headers={**extra, **headers},
        content=endpoint.body or None,
    )


def test_every_endpoint_against_every_credential(
    secured: tuple[TestClient, CallMeter], backend: Backend
) -> None:
    client, meter = secured
    table: list[list[str]] = []
    for row, endpoint in enumerate(ENDPOINTS):
        seeded = client.put(f"{ROOT}private/row{row}", headers={**TEXT, **admin()}, content=b"keep")
        assert seeded.status_code == 201
        before = _stored(backend)
        cells = []
        for credential in CREDENTIALS:
            headers, params = credential.present(endpoint, endpoint.path(row))
            if credential.name == "token valid":
                after_refusals = _stored(backend)
                assert after_refusals == before, f"{endpoint.name}: a refusal changed the store"
            meter.reset()
            response = _send(client, endpoint, row, headers, params)
            status = response.status_code
            want = expected_status(endpoint, credential.name)
            where = f"{endpoint.name} / {credential.name}: {response.text}"
            assert status == want, where
            cells.append(str(status))
            if status in {401, 403}:
                assert sum(meter.calls.values()) == 0, f"{where}: {dict(meter.calls)}"
                if endpoint.method != "HEAD":
                    body = response.json()
                    assert body["error"] in {"unauthorized", "forbidden"}
                    assert len(response.text) < 200
                assert response.headers["cache-control"] == "no-store"
                challenge = response.headers.get("www-authenticate")
                if status == 401 or credential.name in {"other prefix", "no action"}:
                    assert challenge and challenge.startswith('Bearer realm="durable-streams"')
                else:
                    assert challenge is None, where
        table.append([endpoint.name, *cells])
    _print_table(["endpoint", *(c.name for c in CREDENTIALS)], table)
    # The valid token did what each endpoint does: the stream of the last rows shows it.
    read = client.get(f"{ROOT}private/row5", params={"offset": "-1"}, headers=admin())
    assert read.content == b"keepmore"
    assert client.head(f"{ROOT}private/row8", headers=admin()).status_code == 404
    fork = client.get(f"{ROOT}private/row9-new", params={"offset": "-1"}, headers=admin())
    assert fork.content == b"keep"


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print()
    for line in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
