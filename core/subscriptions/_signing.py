"""Webhook signatures (PROTOCOL 6.5, 7.1): Ed25519 over `<timestamp>.<raw body>`.

Asymmetric, so that receivers verify with the public keys the server publishes as a JWKS and
no shared secret ever leaves the server or appears in a subscription response.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from ._b64 import b64url_decode, b64url_encode

SEED_BYTES = 32
SIGNATURE_BYTES = 64
# Receivers reject signatures older (or further ahead) than this, in seconds: PROTOCOL 7.1's
# "small replay window such as five minutes".
REPLAY_WINDOW_SECONDS = 300
KID_PREFIX = "ds_"
# Keeps a seed derived from a stored secret distinct from anything else hashed from that secret.
_SECRET_LABEL = b"durable-streams webhook signing\0"
# A decimal Unix time in its one canonical spelling: the signed text is the header's `t`
# verbatim, so `t=017` must not stand for 17.
_TIMESTAMP = re.compile(r"0|[1-9][0-9]{0,15}")


class SigningKey:
    """One Ed25519 webhook signing key and its public JWK."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._private = private_key
        raw_public = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self._x = b64url_encode(raw_public)
        self.kid = KID_PREFIX + _thumbprint(self._x)

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
            raise ValueError(f"an Ed25519 seed is {SEED_BYTES} bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_secret_text(cls, text: str) -> SigningKey:
        """The key for a stored random secret string (as Secrets Manager generates one), so a
        deployment keeps one secret and its key survives restarts."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the webhook signing secret is empty")
        return cls.from_seed(hashlib.sha256(_SECRET_LABEL + text.encode("utf-8")).digest())

    @property
    def seed(self) -> bytes:
        return self._private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())

    def public_jwk(self) -> dict[str, str]:
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "kid": self.kid,
            "use": "sig",
            "alg": "EdDSA",
            "x": self._x,
        }

    def signature_header(self, body: bytes, timestamp: int) -> str:
        """The `Webhook-Signature` value for this exact body, sent at `timestamp` (Unix
        seconds)."""
        if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
            raise ValueError("the signature timestamp is a non-negative integer")
        signature = self._private.sign(_signed_text(str(timestamp), body))
        return f"t={timestamp},kid={self.kid},ed25519={b64url_encode(signature)}"

    def __repr__(self) -> str:
        # Never the seed: a key that ends up in a log line must not give the key away.
        return f"SigningKey(kid={self.kid!r})"


def jwks(keys: Sequence[SigningKey]) -> dict[str, list[dict[str, str]]]:
    """The JWK Set of these keys, each once: the active key and the ones being rotated out."""
    published: dict[str, dict[str, str]] = {}
    for key in keys:
        published.setdefault(key.kid, key.public_jwk())
    return {"keys": list(published.values())}


def verify_signature(
    header: str,
    body: bytes,
    jwks: Mapping[str, object],
    *,
    now: float,
    window: float = REPLAY_WINDOW_SECONDS,
) -> bool:
    """Whether `header` is a valid signature of `body` by a key of the JWK Set, made within
    `window` seconds of `now`. False for anything malformed; never raises."""
    fields = _parse_header(header)
    if fields is None or not isinstance(body, bytes):
        return False
    timestamp, kid, signature_text = fields
    try:
        if abs(now - int(timestamp)) > window:
            return False
    except (TypeError, ValueError, OverflowError):
        return False
    signature = b64url_decode(signature_text)
    public = _public_key(jwks, kid)
    if signature is None or len(signature) != SIGNATURE_BYTES or public is None:
        return False
    try:
        public.verify(signature, _signed_text(timestamp, body))
    except InvalidSignature:
        return False
    return True


def _signed_text(timestamp: str, body: bytes) -> bytes:
    return timestamp.encode("ascii") + b"." + body


def _thumbprint(x: str) -> str:
    # RFC 7638: the required members only, sorted, no whitespace; RFC 8037 names them for OKP.
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"))
    return b64url_encode(hashlib.sha256(canonical.encode("ascii")).digest())


def _parse_header(header: object) -> tuple[str, str, str] | None:
    """(t, kid, ed25519) from exactly those three parameters, each once, or None."""
    if not isinstance(header, str) or not header.isascii() or len(header) > 1024:
        return None
    fields: dict[str, str] = {}
    for item in header.split(","):
        name, equals, value = item.partition("=")
        if not equals or not value or name in fields or name not in {"t", "kid", "ed25519"}:
            return None
        fields[name] = value
    if len(fields) != 3 or not _TIMESTAMP.fullmatch(fields["t"]):
        return None
    return fields["t"], fields["kid"], fields["ed25519"]


def _public_key(jwks: object, kid: str) -> Ed25519PublicKey | None:
    """The Ed25519 key of this kid in the JWK Set; None if there is not exactly one."""
    keys = jwks.get("keys") if isinstance(jwks, Mapping) else None
    if not isinstance(keys, Sequence) or isinstance(keys, str | bytes):
        return None
    matching = [jwk for jwk in keys if isinstance(jwk, Mapping) and jwk.get("kid") == kid]
    if len(matching) != 1:
        return None
    jwk = matching[0]
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        return None
    if jwk.get("alg", "EdDSA") != "EdDSA" or jwk.get("use", "sig") != "sig":
        return None
    x = jwk.get("x")
    raw = b64url_decode(x) if isinstance(x, str) else None
    if raw is None or len(raw) != SEED_BYTES:
        return None
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        return None
