"""Unpadded base64url (RFC 4648 section 5), as JOSE, webhook signatures and wake tokens use it."""

from __future__ import annotations

import base64
import binascii
import re

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes | None:
    """The bytes, or None unless the text is their one canonical encoding. Refusing padding,
    other alphabets and stray trailing bits means a signature or token has exactly one
    spelling, so no altered string still verifies."""
    if not isinstance(text, str) or not _ALPHABET.fullmatch(text) or len(text) % 4 == 1:
        return None
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return data if b64url_encode(data) == text else None
