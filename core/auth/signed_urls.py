"""Signed read URLs: an HMAC over what the URL may read and until when, carried in its query.

    ?expires=1767225600&signature=...            reads of exactly this stream
    ?expires=...&scope=chat/&signature=...        reads of every stream under chat/ (* for all)
    &kid=2026-11                                  which key signed it (during a rotation)

The signed text names its kind ("stream" or "prefix"), so a signature for the stream `chat/a`
is never taken as one for everything under `chat/a/`. The key is derived from the token key
for this use only, so a signed URL and a token never share a MAC key. Expiries are rounded up
to a step (`round_expiry`), so every reader handed a URL for the same stream within one step
holds the same URL, and shares the CDN's cache entries with the others.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from collections.abc import Mapping

from ..protocol.errors import ProtocolError
from ..protocol.paths import parse_path_prefix
from .decision import BAD_SIGNATURE, DEFAULT_MAX_LIFETIME_SECONDS, BadSignature, SignedRead
from .grants import EVERY_STREAM
from .keys import KeySet

EXPIRES = "expires"
SCOPE = "scope"
KEY_ID = "kid"
SIGNATURE = "signature"
# Every parameter a signed URL carries: the CDN's cache key includes them all.
SIGNED_URL_PARAMETERS: tuple[str, ...] = (EXPIRES, KEY_ID, SCOPE, SIGNATURE)

_DERIVATION = b"durable-streams signed read URL v1"
# ASCII digits only (str.isdigit accepts others), no leading zero: one spelling per expiry.
_UNIX_SECONDS = re.compile(r"[1-9][0-9]{0,11}")


def round_expiry(now: float, lifetime: float, step: int) -> int:
    """`now + lifetime`, rounded up to a multiple of `step` seconds."""
    return math.ceil((now + lifetime) / step) * step


def sign(keys: KeySet, target: str, expires: int, *, prefix: bool = False) -> dict[str, str]:
    """The query parameters that let their holder read `target` (one stream, or every stream
    under it when `prefix`) until `expires` (Unix seconds)."""
    key_id, secret = keys.signing_key
    target = target.lstrip("/")
    params = {EXPIRES: str(expires)}
    if not target:
        # A URL for the empty path would name no stream but cover the stream root, where the
        # control API lives.
        raise ValueError(f"name a stream or a prefix ({EVERY_STREAM}: every stream)")
    if prefix:
        params[SCOPE] = target
        target = "" if target == EVERY_STREAM else target
    if key_id:
        params[KEY_ID] = key_id
    params[SIGNATURE] = _mac(secret, target, prefix, expires)
    return params


def presents_signature(query: Mapping[str, str]) -> bool:
    return SIGNATURE in query


def verify(
    keys: KeySet,
    query: Mapping[str, str],
    path: str,
    now: float,
    max_lifetime: float = DEFAULT_MAX_LIFETIME_SECONDS,
) -> SignedRead | BadSignature:
    """The signed read a URL for `path` with this query grants, or why it grants nothing.
    An expiry more than `max_lifetime` seconds ahead is refused, whoever signed it."""
    expires_text = query.get(EXPIRES, "")
    if not _UNIX_SECONDS.fullmatch(expires_text):
        return BadSignature("expires must be a Unix time in seconds")
    expires = int(expires_text)
    if expires <= now:
        return BadSignature("expired")
    if expires > now + max_lifetime:
        return BadSignature("expires too far ahead")
    secret = keys.find(query.get(KEY_ID) or None)
    if secret is None:
        return BadSignature(BAD_SIGNATURE)  # as a wrong signature: key ids stay unknown
    is_prefix = SCOPE in query
    target = query[SCOPE].lstrip("/") if is_prefix else path
    if not is_prefix and not target:
        return BadSignature("a stream URL names a stream")
    if is_prefix:
        # Only `*` covers every stream: an empty scope is a mistake (an empty variable).
        if not target:
            return BadSignature("scope is empty")
        try:
            parse_path_prefix(target)
        except ProtocolError:
            return BadSignature("scope is not a path prefix")
        target = "" if target == EVERY_STREAM else target
    expected = _mac(secret, target, is_prefix, expires)
    presented = query.get(SIGNATURE, "").encode("utf-8", "replace")
    if not hmac.compare_digest(expected.encode(), presented):
        return BadSignature(BAD_SIGNATURE)
    return SignedRead(target, is_prefix, expires)


def _mac(secret: bytes, target: str, prefix: bool, expires: int) -> str:
    key = hmac.new(secret, _DERIVATION, hashlib.sha256).digest()
    kind = "prefix" if prefix else "stream"
    message = f"{kind}\n{target}\n{expires}".encode()
    digest = hmac.new(key, message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
