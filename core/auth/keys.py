"""The HMAC keys that sign tokens (HS256) and read URLs, and where they are kept.

A key set is the text of one secret: either the key itself, or JSON naming several keys,

    {"keys": [{"kid": "2026-12", "secret": "..."}, {"kid": "2026-11", "secret": "..."}]}

The first key signs; every key verifies, chosen by the `kid` a token or URL carries (a key
without a kid verifies what carries none). Rotating is therefore: put the new key first and
keep the old one second, wait until everything the old one signed has expired, then drop it.

The text comes from the settings themselves (local use and tests), AWS Secrets Manager, or SSM
Parameter Store, read through Powertools' parameters utility and kept for `max_age` seconds:
one AWS call per container per `max_age`, whatever the traffic (`StoredValue`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from ..config import KeySettings

MIN_SECRET_BYTES = 32
T = TypeVar("T")
logger = logging.getLogger("dsaws")


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
            keys = tuple((str(e.get("kid") or ""), str(e["secret"]).encode()) for e in entries)
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


class StoredValue(Generic[T]):
    """A value kept in the settings themselves, in Secrets Manager (`secret_id`) or in SSM
    Parameter Store (`parameter`, a SecureString), parsed by `parse`.

    A stored value is read through Powertools' parameters utility (with short timeouts) and
    kept for `max_age` seconds. When a refresh fails (the service is unreachable, or a rotation
    stored something that does not parse) the last good value is kept, the failure logged, and
    the refresh tried again after `RETRY_SECONDS`: a bad rotation or an outage never turns
    every request into an error. Only a process that never read a good value answers
    `KeysUnavailable`."""

    RETRY_SECONDS = 10.0
    # Every stored value of the process, for `expire_all` and `close_all_connections`.
    _instances: weakref.WeakSet[StoredValue[Any]] = weakref.WeakSet()

    def __init__(
        self,
        parse: Callable[[str], T],
        *,
        inline: str | None = None,
        secret_id: str | None = None,
        parameter: str | None = None,
        max_age: float = 300,
    ) -> None:
        if sum(v is not None for v in (inline, secret_id, parameter)) != 1:
            raise KeyConfigError("name exactly one place for the value")
        self._parse = parse
        self._inline = None if inline is None else parse(inline)
        self._secret_id = secret_id
        self._parameter = parameter
        self._max_age = max_age
        self._good: tuple[str, T] | None = None
        self._next_refresh = 0.0
        self._lock = threading.Lock()
        self._client: Any = None
        StoredValue._instances.add(self)

    @classmethod
    def expire_all(cls) -> None:
        """Every value is read again on its next use (the last good one kept if that fails):
        for a process restored from a snapshot, whose monotonic clock says nothing of the time
        the snapshot was kept."""
        for value in list(cls._instances):
            value._next_refresh = 0.0

    @classmethod
    def close_all_connections(cls) -> None:
        """Closes the pooled connections to Secrets Manager or SSM; the next read opens one."""
        for value in list(cls._instances):
            if value._client is not None:
                value._client.client.close()

    @property
    def stored(self) -> bool:
        """Whether reading it may call AWS (then not on an event loop)."""
        return self._inline is None

    def current(self) -> T:
        if self._inline is not None:
            return self._inline
        good = self._good
        if good is not None and time.monotonic() < self._next_refresh:
            return good[1]
        # One thread refreshes; while it does, the others go on with the last good value (and
        # only wait when there is none yet).
        if self._lock.acquire(blocking=good is None):
            try:
                if self._good is None or time.monotonic() >= self._next_refresh:
                    self._refresh()
            finally:
                self._lock.release()
        assert self._good is not None
        return self._good[1]

    def _refresh(self) -> None:
        try:
            text = self._fetch()
            value = self._good[1] if self._good and self._good[0] == text else self._parse(text)
        except Exception as exc:  # whatever went wrong, a good value in hand is kept
            if self._good is None:
                raise KeysUnavailable(f"{self._where()}: {exc}") from exc
            logger.warning("keeping the last good value of %s: %s", self._where(), exc)
            self._next_refresh = time.monotonic() + self.RETRY_SECONDS
            return
        self._good = (text, value)
        self._next_refresh = time.monotonic() + self._max_age

    def _where(self) -> str:
        return f"secret {self._secret_id}" if self._secret_id else f"parameter {self._parameter}"

    def _fetch(self) -> str:
        from aws_lambda_powertools.utilities import parameters

        value: Any
        try:
            if self._secret_id is not None:
                value = self._provider().get(self._secret_id, force_fetch=True)
            else:
                value = self._provider().get(self._parameter, decrypt=True, force_fetch=True)
        except parameters.exceptions.GetParameterError as exc:
            raise KeysUnavailable(f"could not be read: {exc}") from exc
        return value.decode() if isinstance(value, bytes) else str(value)

    def _provider(self) -> Any:
        """Powertools' provider (this class keeps the value and times its refreshes). It is
        imported only where a stored value is used: inline keys do without it."""
        if self._client is None:
            from aws_lambda_powertools.utilities import parameters
            from botocore.config import Config

            # A hanging call must not outlast the function's timeout (the default waits 60 s,
            # with retries): this one gives up within seconds, and the last good value is kept.
            config = Config(connect_timeout=2, read_timeout=2, retries={"max_attempts": 2})
            if self._secret_id is not None:
                self._client = parameters.SecretsProvider(boto_config=config)
            else:
                self._client = parameters.SSMProvider(boto_config=config)
        return self._client


KeySource = StoredValue[KeySet]


def hmac_key_source(settings: KeySettings) -> KeySource | None:
    """Where the settings say the HMAC keys are (None: nowhere; tokens come from a JWKS)."""
    if not settings.configured:
        return None
    return StoredValue(
        parse_key_set,
        inline=settings.inline,
        secret_id=settings.secret_id,
        parameter=settings.parameter,
        max_age=settings.max_age,
    )
