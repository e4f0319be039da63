"""The request-facing side of access control: reads what a request presents (a bearer token,
signed-URL parameters), verifies it, and asks `decision.decide`. Built once per process; the
only I/O is fetching keys, which are cached (module docstrings of `keys` and `tokens`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ..config import AuthSettings
from . import signed_urls
from .decision import BadSignature, Decision, Need, Presented, decide
from .keys import hmac_key_source
from .signed_urls import SIGNED_URL_PARAMETERS
from .tokens import TokenVerifier


class Guard:
    def __init__(self, settings: AuthSettings) -> None:
        self.public_prefixes = settings.public_prefixes
        self.hmac_keys = hmac_key_source(settings.keys)
        self.tokens = TokenVerifier(
            audience=settings.audience,
            issuer=settings.issuer,
            claim=settings.claim,
            hmac_keys=self.hmac_keys,
            jwks_url=settings.jwks_url,
            max_lifetime=settings.max_lifetime,
        )
        self.max_lifetime = settings.max_lifetime
        if self.hmac_keys is not None:
            self.hmac_keys.current()  # at start: bad keys fail the start, not a request

    def check(
        self,
        needs: Sequence[Need],
        headers: Mapping[str, str],
        query: Sequence[tuple[str, str]],
        path: str,
    ) -> Decision:
        """Whether a request for `path` (its query as name-value pairs) that needs `needs` may
        go ahead. May fetch keys (cached): call it from a worker thread, not the event loop."""
        return decide(needs, self.public_prefixes, lambda: self._presented(headers, query, path))

    def bearer(self, headers: Mapping[str, str]) -> Presented:
        """The bearer token the request carries, verified (None: it carries none). May fetch
        keys (cached): call it from a worker thread."""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return self.tokens.verify(token.strip())
        return None

    def _presented(
        self, headers: Mapping[str, str], query: Sequence[tuple[str, str]], path: str
    ) -> Presented:
        presented = self.bearer(headers)
        if presented is not None:
            return presented
        signed = {name: value for name, value in query if name in SIGNED_URL_PARAMETERS}
        if not signed_urls.presents_signature(signed) or self.hmac_keys is None:
            return None
        if len(signed) != sum(name in SIGNED_URL_PARAMETERS for name, _ in query):
            # One value per parameter: a cache and the server must read the same URL.
            return BadSignature("a signed-URL parameter is repeated")
        return signed_urls.verify(
            self.hmac_keys.current(), signed, path, time.time(), self.max_lifetime
        )
