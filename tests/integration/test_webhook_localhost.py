"""Loopback webhooks make the server POST to ports of its own machine: `dsaws serve` accepts
them only where nobody else can subscribe (listening on loopback, access control off), or when
told to (`DS_WEBHOOK_ALLOW_LOCALHOST=true`)."""

from __future__ import annotations

import httpx
import pytest
from auth_support import KEY_SET_TEXT, bearer, token
from support import ServerProcess

SUBSCRIPTION = {"type": "webhook", "pattern": "jobs/*", "webhook": {"url": "http://127.0.0.1:9/x"}}


@pytest.mark.parametrize(
    ("args", "env", "accepted"),
    [
        ((), {}, True),
        (("--host", "0.0.0.0"), {}, False),
        (("--auth",), {"DS_AUTH_SECRET": KEY_SET_TEXT}, False),
        (("--host", "0.0.0.0", "--auth"), {"DS_AUTH_SECRET": KEY_SET_TEXT}, False),
        (
            ("--host", "0.0.0.0", "--auth"),
            {"DS_AUTH_SECRET": KEY_SET_TEXT, "DS_WEBHOOK_ALLOW_LOCALHOST": "true"},
            True,
        ),
    ],
)
def test_loopback_webhooks_only_on_a_private_server_or_by_opt_in(
    args: tuple[str, ...], env: dict[str, str], accepted: bool
) -> None:
    with ServerProcess(*args, env=env) as server:
        url = f"{server.base_url}/v1/stream/__ds/subscriptions/local"
        answer = httpx.put(url, json=SUBSCRIPTION, headers=bearer(token("read,create:*")))
        if accepted:
            assert answer.status_code == 201, answer.text
        else:
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["code"] == "WEBHOOK_URL_REJECTED"
