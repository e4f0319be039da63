"""Token verification with PyJWT: HS256 against the key set (with a rotation in progress), and
RS256/ES256 against a JWKS served from this machine."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import jwt
import pytest
from auth_support import (
    AUDIENCE,
    CURRENT_KID,
    KEY_SET_TEXT,
    PREVIOUS_KID,
    PREVIOUS_SECRET,
    alg_none,
    tampered,
    token,
    unknown_kid,
    wrong_algorithm,
)
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from durable_streams_aws.core.auth import (
    BadToken,
    Bearer,
    StoredValue,
    TokenVerifier,
    parse_grants,
    parse_key_set,
)

SCOPE = "read,append:chat/"
KEYS = StoredValue(parse_key_set, inline=KEY_SET_TEXT)


@pytest.fixture
def verifier() -> TokenVerifier:
    return TokenVerifier(
        audience=AUDIENCE, issuer=None, hmac_keys=StoredValue(parse_key_set, inline=KEY_SET_TEXT)
    )


def test_a_valid_token_yields_its_grants_and_subject(verifier: TokenVerifier) -> None:
    assert verifier.verify(token(SCOPE, subject="svc")) == Bearer(parse_grants(SCOPE), "svc")


def test_a_token_of_the_previous_key_still_verifies_during_a_rotation(
    verifier: TokenVerifier,
) -> None:
    now = int(time.time())
    claims = {"aud": AUDIENCE, "exp": now + 60, "scope": SCOPE}
    old = jwt.encode(claims, PREVIOUS_SECRET, algorithm="HS256", headers={"kid": PREVIOUS_KID})
    assert isinstance(verifier.verify(old), Bearer)
    assert jwt.get_unverified_header(token(SCOPE))["kid"] == CURRENT_KID  # the new key signs


def test_a_token_may_not_outlive_the_maximum_lifetime(verifier: TokenVerifier) -> None:
    """A token whose expiry is further ahead than the configured maximum is refused, however
    well signed: such a token could only be revoked by removing its key."""
    week = 7 * 24 * 3600
    assert isinstance(verifier.verify(token(SCOPE, lifetime=week)), Bearer)
    assert verifier.verify(token(SCOPE, lifetime=week + 120)) == BadToken("expires too far ahead")
    assert verifier.verify(token(SCOPE, lifetime=10**20)) == BadToken("expires too far ahead")
    short = TokenVerifier(
        audience=AUDIENCE,
        hmac_keys=StoredValue(parse_key_set, inline=KEY_SET_TEXT),
        max_lifetime=600,
    )
    assert isinstance(short.verify(token(SCOPE, lifetime=600)), Bearer)
    assert short.verify(token(SCOPE, lifetime=3600)) == BadToken("expires too far ahead")


@pytest.mark.parametrize(
    ("forged", "reason"),
    [
        (lambda: token(SCOPE, lifetime=60, now=time.time() - 3600), "expired"),
        (lambda: token(SCOPE, now=time.time() + 3600), "not valid yet"),
        (lambda: token(SCOPE, audience="other"), "wrong audience"),
        (lambda: tampered("read:x/", "read:*"), "signature does not match"),
        (lambda: alg_none(SCOPE), "algorithm not accepted"),
        (lambda: wrong_algorithm(SCOPE), "algorithm not accepted"),
        (lambda: unknown_kid(SCOPE), "signature does not match"),  # as a bad MAC
        (lambda: "not.a.token", "malformed"),
        (lambda: _with_header({"alg": "HS256", "kid": 123}), "malformed"),
        (lambda: _with_header({"alg": "HS256", "crit": ["exp"]}), "malformed"),
        (lambda: "garbage", "malformed"),
    ],
)
def test_bad_tokens_are_refused_with_the_reason(
    verifier: TokenVerifier, forged: Any, reason: str
) -> None:
    assert verifier.verify(forged()) == BadToken(reason)


def _with_header(header: dict[str, Any]) -> str:
    _, payload, signature = token(SCOPE).split(".")
    encoded = jwt.utils.base64url_encode(json.dumps(header).encode()).decode()
    return f"{encoded}.{payload}.{signature}"


def test_a_token_without_expiry_or_of_another_issuer_is_refused() -> None:
    strict = TokenVerifier(
        audience=AUDIENCE,
        issuer="https://issuer",
        hmac_keys=StoredValue(parse_key_set, inline=KEY_SET_TEXT),
    )
    assert strict.verify(token(SCOPE)) == BadToken("no iss claim")
    assert strict.verify(token(SCOPE, issuer="https://other")) == BadToken("wrong issuer")
    assert isinstance(strict.verify(token(SCOPE, issuer="https://issuer")), Bearer)
    endless = jwt.encode(
        {"aud": AUDIENCE, "scope": SCOPE},
        "current-secret-" + "c" * 32,
        algorithm="HS256",
        headers={"kid": CURRENT_KID},
    )
    assert strict.verify(endless) == BadToken("no exp claim")


# ---------------------------------------------------------------- JWKS

served: dict[str, Any] = {}
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ISSUER = "https://idp.example"


def _jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    algorithm = jwt.algorithms.RSAAlgorithm if alg == "RS256" else jwt.algorithms.ECAlgorithm
    jwk = json.loads(algorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


@pytest.fixture
def jwks_url() -> Iterator[str]:
    served["keys"] = [_jwk(RSA_KEY, "rsa-1", "RS256"), _jwk(EC_KEY, "ec-1", "ES256")]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"keys": served["keys"]}).encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"
    server.shutdown()


def _idp_token(key: Any, alg: str, kid: str, **claims: Any) -> str:
    now = int(time.time())
    payload = {"aud": AUDIENCE, "iss": ISSUER, "exp": now + 60, "scope": SCOPE, **claims}
    return jwt.encode(payload, key, algorithm=alg, headers={"kid": kid})


def test_identity_provider_tokens_verify_against_its_jwks(jwks_url: str) -> None:
    verifier = TokenVerifier(audience=AUDIENCE, issuer=ISSUER, jwks_url=jwks_url)
    assert isinstance(verifier.verify(_idp_token(RSA_KEY, "RS256", "rsa-1")), Bearer)
    assert isinstance(verifier.verify(_idp_token(EC_KEY, "ES256", "ec-1")), Bearer)
    assert verifier.verify(_idp_token(RSA_KEY, "RS256", "rsa-9")) == BadToken(
        "signature does not match"
    )
    # The RSA key's tokens under the EC key's id: the key does not fit the algorithm.
    assert verifier.verify(_idp_token(RSA_KEY, "RS256", "ec-1")) == BadToken(
        "the key does not fit the algorithm"
    )
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert verifier.verify(_idp_token(other, "RS256", "rsa-1")) == BadToken(
        "signature does not match"
    )


def test_hs256_signed_with_the_public_key_is_refused(jwks_url: str) -> None:
    """Algorithm confusion: an attacker signs HS256 with the provider's public key as the
    secret. With no HMAC keys configured, HS256 is simply not an accepted algorithm."""
    verifier = TokenVerifier(audience=AUDIENCE, issuer=ISSUER, jwks_url=jwks_url)
    public_pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    now = int(time.time())
    payload = {"aud": AUDIENCE, "iss": ISSUER, "exp": now + 60, "scope": SCOPE}
    header = {"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}
    signing_input = ".".join(
        jwt.utils.base64url_encode(json.dumps(part).encode()).decode() for part in (header, payload)
    )
    import hashlib
    import hmac

    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    forged = f"{signing_input}.{jwt.utils.base64url_encode(mac).decode()}"
    assert verifier.verify(forged) == BadToken("algorithm not accepted")


def test_a_key_the_provider_removed_is_refused_once_the_jwks_is_refreshed(
    jwks_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("durable_streams_aws.core.auth.tokens.JWKS_CACHE_SECONDS", 0.2)
    verifier = TokenVerifier(audience=AUDIENCE, issuer=ISSUER, jwks_url=jwks_url)
    assert isinstance(verifier.verify(_idp_token(RSA_KEY, "RS256", "rsa-1")), Bearer)
    served["keys"] = [k for k in served["keys"] if k["kid"] != "rsa-1"]
    time.sleep(0.3)
    assert verifier.verify(_idp_token(RSA_KEY, "RS256", "rsa-1")) == BadToken(
        "signature does not match"
    )
