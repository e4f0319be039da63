"""The request-facing side of access control: reads what a request presents (a bearer token,
signed-URL parameters), verifies it, and asks `decision.decide`. Built once per process; the
only I/O is fetching keys, which are cached (module docstrings of `keys` and `tokens`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ..config import Settings
from . import signed_urls
from .decision import Decision, Need, Presented, judge, without_credentials
from .keys import hmac_key_source
from .tokens import TokenVerifier


class Guard:
    def __init__(self, settings: Settings) -> None:
        self.public_prefixes = settings.public_prefixes
        self.hmac_keys = hmac_key_source(settings)
        self.tokens = TokenVerifier(
            audience=settings.auth_audience,
            issuer=settings.auth_issuer,
            claim=settings.auth_claim,
            hmac_keys=self.hmac_keys,
            jwks_url=settings.auth_jwks_url,
        )
        if self.hmac_keys is not None:
            self.hmac_keys.current()  # at start: bad keys fail the start, not a request

    def check(
        self,
        needs: Sequence[Need],
        headers: Mapping[str, str],
        query: Mapping[str, str],
        path: str,
    ) -> Decision:
        """Whether a request for `path` that needs `needs` may go ahead. Public reads are
        decided before any credential is looked at, so they never cost a verification."""
        free = without_credentials(needs, self.public_prefixes)
        return free or judge(needs, self._presented(headers, query, path))

    def _presented(
        self, headers: Mapping[str, str], query: Mapping[str, str], path: str
    ) -> Presented:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return self.tokens.verify(token.strip())
        if signed_urls.presents_signature(query) and self.hmac_keys is not None:
            return signed_urls.verify(self.hmac_keys.current(), query, path, time.time())
        return None
