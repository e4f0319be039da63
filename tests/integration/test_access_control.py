"""Access control end to end: every endpoint and method against every kind of bad credential,
then a good one. A refusal is 401 or 403 with a short JSON body (and `WWW-Authenticate` where a
bearer token could help), costs no AWS call, and leaves the table and the bucket as they were.

Run with `-s` to see the refusal table (the closing note of issue 12 carries it)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.auth import round_expiry, sign
from durable_streams_aws.core.runtime import Backend

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
    meter.attach_backend(backend)
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


# ---------------------------------------------------------------- subscription routes

SUBS = ROOT + "__ds/subscriptions"
CONSUMER = "read,consume:*"  # what a pull-wake worker needs
OWNER = "read,create:* append:wake/"  # what making (and reading in full) a subscription needs


class _WebhookReceiver:
    """Records each wake POSTed to it and answers without `done`: the wake stays leased."""

    def __init__(self) -> None:
        self.wakes: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                receiver.wakes.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


def _quiet(meter: CallMeter, for_seconds: float = 0.3, within: float = 10.0) -> None:
    """Until no AWS call has been made for `for_seconds`: the in-process delivery of a wake
    writes after its POST returns, and a refusal's call count must be its own."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        before = sum(meter.calls.values())
        time.sleep(for_seconds)
        if sum(meter.calls.values()) == before:
            return
    raise AssertionError("the subscription service kept calling AWS")


@dataclass(frozen=True)
class WakeRoute:
    name: str
    method: str
    url: str
    body: dict[str, Any] | None
    ok: int  # what the credential that should work gets
    wake_token: str | None = None  # a wake request: "pull" or "hook", whose token works


def test_subscription_routes_against_every_read_only_principal(backend: Backend) -> None:
    """Claiming a wake and acknowledging, extending or releasing it are writes: a public `*`
    prefix, a signed read URL for every stream and a `read:*` token may read a subscription's
    state (without its webhook URL), and nothing more. Every refusal makes no AWS call and
    changes nothing; then the credential that should work does the thing."""
    receiver = _WebhookReceiver()
    settings = backend.settings.model_copy(
        update={
            "auth": True,
            "auth_secret": KEY_SET_TEXT,
            "public_read_prefixes": "*",  # a documented template value
            "webhook_secret": "access-control tests",
            "webhook_allow_localhost": True,  # the receiver above is local
            "subscription_sweep_seconds": 0,
        }
    )
    meter = CallMeter()
    meter.attach_backend(backend)
    owner = bearer(token(OWNER))
    with TestClient(create_app(settings, backend.store)) as client:
        for path, kind in (("data/a", "text/plain"), ("wake/pool", "application/json")):
            created = client.put(ROOT + path, headers={"Content-Type": kind, **admin()})
            assert created.status_code == 201
        pull = {"type": "pull-wake", "streams": ["data/a"], "wake_stream": "wake/pool"}
        hook = {"type": "webhook", "streams": ["data/a"], "webhook": {"url": receiver.url}}
        assert client.put(f"{SUBS}/pull", json=pull, headers=owner).status_code == 201
        assert client.put(f"{SUBS}/hook", json=hook, headers=owner).status_code == 201
        append = client.post(ROOT + "data/a", content=b"work", headers={**TEXT, **admin()})
        assert append.status_code == 204
        deadline = time.monotonic() + 10
        while not receiver.wakes and time.monotonic() < deadline:
            time.sleep(0.05)
        assert receiver.wakes, "the webhook was never woken"
        hook_wake = receiver.wakes[0]
        tail = hook_wake["streams"][0]["tail_offset"]
        _quiet(meter)

        claimed: dict[str, Any] = {}
        principals: dict[str, tuple[dict[str, str], dict[str, str]]] = {
            "public * (nothing)": ({}, {}),
            "signed URL scope=*": (
                {},
                sign(KEYS, "*", round_expiry(time.time(), 600, 300), prefix=True),
            ),
            "read:* token": (bearer(token("read:*")), {}),
        }

        def wake_body(kind: str, **extra: Any) -> dict[str, Any]:
            if kind == "hook":
                return {
                    "wake_id": hook_wake["wake_id"],
                    "generation": hook_wake["generation"],
                    **extra,
                }
            return {"wake_id": claimed["wake_id"], "generation": claimed["generation"], **extra}

        routes = [
            WakeRoute("describe", "GET", f"{SUBS}/hook", None, 200),
            WakeRoute("claim", "POST", f"{SUBS}/pull/claim", {"worker": "w1"}, 200),
            WakeRoute("heartbeat (ack, no done)", "POST", f"{SUBS}/pull/ack", {}, 200, "pull"),
            WakeRoute(
                "ack",
                "POST",
                f"{SUBS}/pull/ack",
                {"acks": [{"stream": "data/a", "offset": tail}]},
                200,
                "pull",
            ),
            WakeRoute("callback (webhook)", "POST", f"{SUBS}/hook/callback", {}, 200, "hook"),
            WakeRoute("release", "POST", f"{SUBS}/pull/release", {}, 204, "pull"),
        ]
        table: list[list[str]] = []
        for route in routes:
            body = None
            if route.body is not None:
                body = wake_body(route.wake_token, **route.body) if route.wake_token else route.body
            cells = []
            before = _stored(backend)
            for name, (headers, params) in principals.items():
                meter.reset()
                response = client.request(
                    route.method, route.url, headers=headers, params=params, json=body
                )
                where = f"{route.name} / {name}: {response.status_code} {response.text}"
                cells.append(str(response.status_code))
                if route.name == "describe":
                    assert response.status_code == 200, where
                    assert response.json()["webhook"]["url"] is None, where
                    continue
                assert response.status_code in {401, 403}, where
                assert sum(meter.calls.values()) == 0, f"{where}: {dict(meter.calls)}"
                assert response.headers["cache-control"] == "no-store"
            assert _stored(backend) == before, f"{route.name}: a refusal changed the store"
            # Then the credential that works.
            if route.name == "describe":
                headers = owner
            elif route.name == "claim":
                headers = bearer(token(CONSUMER))
            elif route.wake_token == "hook":
                headers = bearer(hook_wake["callback_token"])
            else:
                headers = bearer(claimed["token"])
            response = client.request(route.method, route.url, headers=headers, json=body)
            assert response.status_code == route.ok, f"{route.name}: {response.text}"
            cells.append(str(response.status_code))
            if route.name == "describe":
                assert response.json()["webhook"]["url"] == receiver.url
            if route.name == "claim":
                claimed.update(response.json())
            table.append([route.name, *cells])
            _quiet(meter)
        _print_table(["route", *principals, "the grant that works"], table)
        # The ack moved the pull subscription's cursor to the tail: its worker saw it through.
        state = client.get(f"{SUBS}/pull", headers=owner).json()
        assert state["streams"][0]["acked_offset"] == tail
    receiver.server.shutdown()


def test_refusals_do_not_tell_key_ids_and_lifetimes_are_bounded(
    secured: tuple[TestClient, CallMeter], backend: Backend
) -> None:
    """An unknown key id and a wrong signature are refused alike (a refusal must not tell which
    key ids exist); a token or signed URL good for longer than DS_AUTH_MAX_LIFETIME (7 days)
    is refused however well signed; a no-break space does not split a scope into two grants."""
    client, _ = secured
    assert client.put(f"{ROOT}private/k", headers={**TEXT, **admin()}).status_code == 201
    url = f"{ROOT}private/k"
    unknown = client.get(url, headers=bearer(unknown_kid("read:private/")))
    forged = client.get(url, headers=bearer(tampered("read:public/", "read:private/")))
    assert unknown.status_code == forged.status_code == 401
    assert unknown.json() == forged.json()
    assert unknown.headers["www-authenticate"] == forged.headers["www-authenticate"]
    week = 7 * 24 * 3600
    assert client.get(url, headers=bearer(token("read:private/", lifetime=week))).status_code == 200
    forever = client.get(url, headers=bearer(token("read:private/", lifetime=10**9)))
    assert forever.status_code == 401 and "too far ahead" in forever.json()["message"]
    far = sign(KEYS, "private/k", int(time.time()) + 10 * week)
    refused = client.get(url, params=far)
    assert refused.status_code == 403 and "too far ahead" in refused.json()["message"]
    # "read:private/k<NBSP>delete:private/" is one odd grant, not read and delete.
    odd = bearer(_raw_scope_token("read:private/k\u00a0delete:private/"))
    assert client.delete(url, headers=odd).status_code == 403
    assert client.get(url, params={"offset": "-1"}, headers=admin()).status_code == 200


def _raw_scope_token(scope: str) -> str:
    """A token whose scope claim is exactly `scope`, signed with the current key."""
    import jwt
    from auth_support import AUDIENCE, CURRENT_KID, CURRENT_SECRET

    now = int(time.time())
    payload = {"aud": AUDIENCE, "iat": now, "exp": now + 600, "scope": scope}
    return jwt.encode(payload, CURRENT_SECRET, algorithm="HS256", headers={"kid": CURRENT_KID})
