"""Keys, tokens and forgeries for the access-control tests."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import jwt

from durable_streams_aws.core.auth import Grant, KeySet, mint_token, parse_grants, parse_key_set

CURRENT_KID = "2026-12"
PREVIOUS_KID = "2026-11"
CURRENT_SECRET = "current-secret-" + "c" * 32
PREVIOUS_SECRET = "previous-secret-" + "p" * 32
# A rotation in progress: the new key signs, the old one still verifies.
KEY_SET_TEXT = json.dumps(
    {
        "keys": [
            {"kid": CURRENT_KID, "secret": CURRENT_SECRET},
            {"kid": PREVIOUS_KID, "secret": PREVIOUS_SECRET},
        ]
    }
)
KEYS: KeySet = parse_key_set(KEY_SET_TEXT)
AUDIENCE = "durable-streams"
ORIGIN_SECRET = "origin-secret-0123456789abcdef"
ALL_ACTIONS = "read,append,create,delete,fork,consume"
# `dsaws serve --auth` configured as a deployment behind its CDN: the origin locked to
# requests that carry the CDN's secret, and one public prefix.
LOCKED_ORIGIN_ENV = {
    "DS_AUTH_SECRET": KEY_SET_TEXT,
    "DS_ORIGIN_LOCK": "all",
    "DS_ORIGIN_SECRET": ORIGIN_SECRET,
    "DS_PUBLIC_READ_PREFIXES": "public/",
}


def grants(text: str) -> tuple[Grant, ...]:
    return parse_grants(text)


def token(
    scope: str,
    *,
    lifetime: float = 600,
    now: float | None = None,
    audience: str = AUDIENCE,
    **claims: Any,
) -> str:
    return mint_token(KEYS, grants(scope), lifetime=lifetime, audience=audience, now=now, **claims)


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def admin() -> dict[str, str]:
    """A token that may do anything, minted now: a token minted when a module is imported
    may have expired by the time a long test run reaches its tests."""
    return bearer(token(f"{ALL_ACTIONS}:*"))


def expired(scope: str) -> str:
    return token(scope, lifetime=60, now=time.time() - 3600)


def _segment(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _payload(scope: str) -> dict[str, Any]:
    now = int(time.time())
    return {"aud": AUDIENCE, "iat": now, "exp": now + 600, "scope": scope}


def tampered(scope: str, wider: str) -> str:
    """A valid token for `scope` whose payload was rewritten to grant `wider`, signature kept."""
    header, _, signature = token(scope).split(".")
    return f"{header}.{_segment(_payload(wider))}.{signature}"


def alg_none(scope: str) -> str:
    return f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(_payload(scope))}."


def wrong_algorithm(scope: str) -> str:
    """Signed with the right key, but with HS512: only HS256 is accepted for HMAC keys."""
    secret = CURRENT_SECRET + "-" * 32  # long enough for HS512, so PyJWT does not warn
    return jwt.encode(_payload(scope), secret, algorithm="HS512", headers={"kid": CURRENT_KID})


def unknown_kid(scope: str) -> str:
    return jwt.encode(
        _payload(scope), "another-secret-" + "x" * 32, algorithm="HS256", headers={"kid": "retired"}
    )
