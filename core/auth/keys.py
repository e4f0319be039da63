"""The HMAC keys that sign tokens (HS256) and read URLs, and where they are kept.

A key set is the text of one secret: either the key itself, or JSON naming several keys,

    {"keys": [{"kid": "2026-12", "secret": "..."}, {"kid": "2026-11", "secret": "..."}]}

The first key signs; every key verifies, chosen by the `kid` a token or URL carries (a key
without a kid verifies what carries none). Rotating is therefore: put the new key first and
keep the old one second, wait until everything the old one signed has expired, then drop it.

The text comes from the settings themselves (local use and tests), AWS Secrets Manager, or SSM
Parameter Store, read through Powertools' parameters utility, which keeps it for `max_age`
seconds: one AWS call per container per `max_age`, whatever the traffic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Settings

MIN_SECRET_BYTES = 32


class KeyConfigError(ValueError):
    """The key set's text cannot be used."""


class KeysUnavailable(Exception):
    """The keys could not be fetched (Secrets Manager, SSM or the JWKS URL failed): the
    request cannot be judged, so it is answered 503, not refused."""


@dataclass(frozen=True)
class KeySet:
    keys: tuple[tuple[str, bytes], ...]  # (kid, secret); kid "" for a key without one

    @property
    def signing_key(self) -> tuple[str, bytes]:
        return self.keys[0]

    def find(self, kid: str | None) -> bytes | None:
        wanted = kid or ""
        return next((secret for key_id, secret in self.keys if key_id == wanted), None)


def parse_key_set(text: str) -> KeySet:
    text = text.strip()
    if text.startswith("{"):
        try:
            entries = json.loads(text)["keys"]
            keys = tuple((str(e.get("kid", "")), str(e["secret"]).encode()) for e in entries)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise KeyConfigError(
                'a key set in JSON is {"keys": [{"kid": ..., "secret": ...}, ...]}'
            ) from exc
    else:
        keys = (("", text.encode()),)
    if not keys:
        raise KeyConfigError("the key set has no key")
    if any(len(secret) < MIN_SECRET_BYTES for _, secret in keys):
        raise KeyConfigError(f"every key must be at least {MIN_SECRET_BYTES} bytes long")
    if len({key_id for key_id, _ in keys}) != len(keys):
        raise KeyConfigError("two keys have the same kid")
    return KeySet(keys)


class KeySource:
    """The current key set, from one of: the text itself, a Secrets Manager secret id, or an
    SSM parameter name (a SecureString, decrypted)."""

    def __init__(
        self,
        *,
        inline: str | None = None,
        secret_id: str | None = None,
        parameter: str | None = None,
        max_age: int = 300,
    ) -> None:
        if sum(v is not None for v in (inline, secret_id, parameter)) != 1:
            raise KeyConfigError("name exactly one place for the HMAC keys")
        self._inline = None if inline is None else parse_key_set(inline)
        self._secret_id = secret_id
        self._parameter = parameter
        self._max_age = max_age
        self._parsed: tuple[str, KeySet] | None = None

    def current(self) -> KeySet:
        if self._inline is not None:
            return self._inline
        text = self._fetch()
        if self._parsed is None or self._parsed[0] != text:
            self._parsed = (text, parse_key_set(text))
        return self._parsed[1]

    def _fetch(self) -> str:
        # Powertools is imported only where a stored secret is used: the local server with an
        # inline key set does without it.
        from aws_lambda_powertools.utilities import parameters

        value: Any
        try:
            if self._secret_id is not None:
                value = parameters.get_secret(self._secret_id, max_age=self._max_age)
            else:
                value = parameters.get_parameter(
                    self._parameter, decrypt=True, max_age=self._max_age
                )
        except parameters.exceptions.GetParameterError as exc:
            raise KeysUnavailable(f"the HMAC keys could not be read: {exc}") from exc
        return value.decode() if isinstance(value, bytes) else str(value)


def hmac_key_source(settings: Settings) -> KeySource | None:
    """Where the settings say the HMAC keys are (None: nowhere; tokens come from a JWKS)."""
    if not (settings.auth_secret or settings.auth_secret_id or settings.auth_secret_parameter):
        return None
    return KeySource(
        inline=settings.auth_secret,
        secret_id=settings.auth_secret_id,
        parameter=settings.auth_secret_parameter,
        max_age=settings.auth_keys_max_age,
    )
