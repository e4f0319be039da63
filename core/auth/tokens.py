"""Bearer tokens: JWTs verified with PyJWT, HS256 against our own keys or RS256/ES256 against an
identity provider's JWKS.

Why PyJWT: it is the most used JWT library in Python and small; `decode` accepts only the
algorithms it is given, so `alg: none` and algorithm confusion are refused by construction (and
PyJWT checks that a key's type fits the algorithm); its `PyJWKClient` fetches a JWKS, caches it
and re-fetches at most once per cooldown for an unknown `kid`, which is all the JWKS handling
the function needs. joserfc covers the rest of JOSE (encryption, JWS serializations) that
bearer tokens do not use, and would leave the JWKS fetching to us.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import jwt

from .decision import BAD_SIGNATURE, DEFAULT_MAX_LIFETIME_SECONDS, BadToken, Bearer
from .grants import Grant, parse_grants, render_grants
from .keys import KeyConfigError, KeySet, KeySource, KeysUnavailable

HMAC_ALGORITHM = "HS256"
JWKS_ALGORITHMS = ("RS256", "ES256")
# Clocks disagree: expiry and not-before are allowed this much slack.
LEEWAY_SECONDS = 30
JWKS_CACHE_SECONDS = 300


class TokenVerifier:
    def __init__(
        self,
        *,
        audience: str,
        claim: str = "scope",
        issuer: str | None = None,
        hmac_keys: KeySource | None = None,
        jwks_url: str | None = None,
        jwks_algorithms: Sequence[str] = JWKS_ALGORITHMS,
        max_lifetime: float = DEFAULT_MAX_LIFETIME_SECONDS,
    ) -> None:
        self.audience = audience
        self.max_lifetime = max_lifetime
        self.issuer = issuer
        self.claim = claim
        self.hmac_keys = hmac_keys
        self.jwks_algorithms = tuple(jwks_algorithms)
        self._jwks = (
            None
            if jwks_url is None
            # The key set is cached (lifespan); single keys are not: `cache_keys` would keep a
            # key the provider has since removed (and its tokens valid) for the process's life.
            else jwt.PyJWKClient(jwks_url, cache_keys=False, lifespan=JWKS_CACHE_SECONDS, timeout=5)
        )

    def verify(self, token: str) -> Bearer | BadToken:
        try:
            header = jwt.get_unverified_header(token)  # a non-string kid is refused here
        except jwt.InvalidTokenError:
            return BadToken("malformed")
        algorithm = header.get("alg")
        kid = header.get("kid")
        if algorithm == HMAC_ALGORITHM and self.hmac_keys is not None:
            key: object | None = self._hmac_key(kid)
        elif algorithm in self.jwks_algorithms and self._jwks is not None:
            jwk = self._jwks_key(kid)
            if jwk is not None and jwk.algorithm_name != algorithm:
                return BadToken("the key does not fit the algorithm")
            key = None if jwk is None else jwk.key
        else:
            return BadToken("algorithm not accepted")
        if key is None:
            return BadToken(BAD_SIGNATURE)
        try:
            claims = jwt.decode(
                token,
                key,  # type: ignore[arg-type]
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp"]},
            )
        except jwt.ExpiredSignatureError:
            return BadToken("expired")
        except jwt.ImmatureSignatureError:
            return BadToken("not valid yet")
        except jwt.InvalidAudienceError:
            return BadToken("wrong audience")
        except jwt.InvalidIssuerError:
            return BadToken("wrong issuer")
        except jwt.InvalidSignatureError:
            return BadToken(BAD_SIGNATURE)
        except jwt.MissingRequiredClaimError as exc:
            return BadToken(f"no {exc.claim} claim")
        except jwt.InvalidTokenError:
            return BadToken("malformed")
        if claims["exp"] > time.time() + self.max_lifetime + LEEWAY_SECONDS:
            return BadToken("expires too far ahead")
        subject = claims.get("sub")
        return Bearer(
            parse_grants(claims.get(self.claim)), subject if isinstance(subject, str) else None
        )

    def _hmac_key(self, kid: str | None) -> bytes | None:
        assert self.hmac_keys is not None
        return self.hmac_keys.current().find(kid)

    def _jwks_key(self, kid: str | None) -> jwt.PyJWK | None:
        assert self._jwks is not None
        if kid is None:
            return None
        try:
            self._jwks.get_signing_keys()  # cached; fetched when stale
        except jwt.PyJWTError as exc:  # unreachable, not JSON, or no usable key in it
            raise KeysUnavailable(f"the JWKS could not be used: {exc}") from exc
        try:
            return self._jwks.get_signing_key(kid)  # an unknown kid refetches, once per cooldown
        except jwt.PyJWKClientConnectionError as exc:
            raise KeysUnavailable(f"the JWKS could not be fetched: {exc}") from exc
        except jwt.PyJWTError:
            return None


def mint_token(
    keys: KeySet,
    grants: Sequence[Grant],
    *,
    lifetime: float,
    audience: str,
    issuer: str | None = None,
    subject: str | None = None,
    claim: str = "scope",
    now: float | None = None,
    kid: str | None = None,
) -> str:
    """An HS256 token signed with the key set's signing key (or the key named `kid`)."""
    issued = int(time.time() if now is None else now)
    payload: dict[str, object] = {
        "aud": audience,
        "iat": issued,
        "nbf": issued,
        "exp": issued + int(lifetime),
        claim: render_grants(grants),
    }
    if issuer:
        payload["iss"] = issuer
    if subject:
        payload["sub"] = subject
    if kid is None:
        kid, secret = keys.signing_key
    else:
        found = keys.find(kid)
        if found is None:
            raise KeyConfigError(f"no key has the kid {kid!r}")
        secret = found
    headers = {"kid": kid} if kid else None
    return jwt.encode(payload, secret, algorithm=HMAC_ALGORITHM, headers=headers)
