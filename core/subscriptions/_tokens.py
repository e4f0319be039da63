"""Wake tokens (PROTOCOL 7.1-7.3, 12.9): the bearer tokens of a webhook callback and of a
pull-wake claim's acks and releases.

A compact HMAC-SHA256 token, `<base64url(JSON payload)>.<base64url(MAC of the first part)>`,
rather than a JWT: only this server issues and reads them, so a header naming an algorithm
would be one more thing to get wrong. The payload scopes the token to one subscription, one
generation and one wake, and bounds its life; the service still checks that generation and wake
are current, which is what fences a stale worker.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass

from ._b64 import b64url_decode, b64url_encode

MIN_KEY_BYTES = 16
# Far longer than any token issued, short enough that verifying junk costs next to nothing.
MAX_TOKEN_CHARS = 4096
_MAC_BYTES = 32
_KEY_LABEL = b"durable-streams callback tokens"
_PAYLOAD_KEYS = frozenset({"sub", "gen", "wake", "exp"})


@dataclass(frozen=True)
class WakeToken:
    subscription_id: str
    generation: int
    wake_id: str
    expires_at: int  # Unix seconds


class TokenSigner:
    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a token key is at least {MIN_KEY_BYTES} bytes")
        self._key = key

    def issue(self, token: WakeToken) -> str:
        if not (
            _is_int(token.generation)
            and token.generation >= 0
            and _is_int(token.expires_at)
            and isinstance(token.subscription_id, str)
            and token.subscription_id
            and isinstance(token.wake_id, str)
            and token.wake_id
        ):
            raise ValueError(f"not a token that verify would accept: {token!r}")
        payload = json.dumps(
            {
                "sub": token.subscription_id,
                "gen": token.generation,
                "wake": token.wake_id,
                "exp": token.expires_at,
            },
            separators=(",", ":"),
        )
        encoded = b64url_encode(payload.encode("utf-8"))
        return f"{encoded}.{b64url_encode(self._mac(encoded))}"

    def verify(self, text: str, *, now: float) -> WakeToken | None:
        """The token's contents if this key issued it and it has not expired; None for anything
        else. Never raises, whatever `text` is."""
        if not isinstance(text, str) or len(text) > MAX_TOKEN_CHARS or not text.isascii():
            return None
        encoded, dot, mac_text = text.partition(".")
        mac = b64url_decode(mac_text) if dot else None
        if mac is None or len(mac) != _MAC_BYTES:
            return None
        # The MAC is checked before the payload is parsed, so the JSON parser only ever sees
        # what this server wrote.
        if not hmac.compare_digest(mac, self._mac(encoded)):
            return None
        token = _parse_payload(encoded)
        if token is None:
            return None
        try:
            expired = not now < token.expires_at
        except TypeError:
            return None
        return None if expired else token

    def _mac(self, encoded: str) -> bytes:
        return hmac.new(self._key, encoded.encode("ascii"), hashlib.sha256).digest()

    def __repr__(self) -> str:
        return "TokenSigner(...)"


def derive_token_key(seed: bytes) -> bytes:
    """The token key, derived from the webhook signing seed so that one stored secret yields
    both keys; HMAC is one-way, so the token key gives nothing away about the signing key."""
    return hmac.new(seed, _KEY_LABEL, hashlib.sha256).digest()


def _parse_payload(encoded: str) -> WakeToken | None:
    raw = b64url_decode(encoded)
    if raw is None:
        return None
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(payload, dict) or payload.keys() != _PAYLOAD_KEYS:
        return None
    subscription_id, generation = payload["sub"], payload["gen"]
    wake_id, expires_at = payload["wake"], payload["exp"]
    if not (
        isinstance(subscription_id, str)
        and subscription_id
        and isinstance(wake_id, str)
        and wake_id
        and _is_int(generation)
        and generation >= 0
        and _is_int(expires_at)
    ):
        return None
    return WakeToken(subscription_id, generation, wake_id, expires_at)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
