"""Access control: who may read, append, create, delete and fork which streams, and who may
read, claim and change subscriptions.

The decision is pure (`decision`, `grants`, `signed_urls`); verifying tokens needs PyJWT
(`tokens`, `guard`), imported on first use so a server without access control never loads it.
"""

from typing import Any

from .decision import (
    LISTING_NEEDS,
    OPEN,
    OPERATOR_NEEDS,
    SUBSCRIPTION_CLAIM_NEEDS,
    SUBSCRIPTION_READ_NEEDS,
    SUBSCRIPTION_WRITE_NEEDS,
    Allowed,
    BadSignature,
    BadToken,
    Bearer,
    Decision,
    Need,
    Presented,
    Refused,
    SignedRead,
    Via,
    decide,
    needs_for,
    operator_needs,
)
from .grants import Action, Grant, parse_grant, parse_grants, render_grants
from .keys import KeyConfigError, KeySet, KeySource, KeysUnavailable, StoredValue, parse_key_set
from .origin import ORIGIN_SECRET_HEADER
from .signed_urls import SIGNED_URL_PARAMETERS, round_expiry, sign

_LAZY = {"Guard": "guard", "TokenVerifier": "tokens", "mint_token": "tokens"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(name)


__all__ = [
    "LISTING_NEEDS",
    "OPEN",
    "OPERATOR_NEEDS",
    "ORIGIN_SECRET_HEADER",
    "SIGNED_URL_PARAMETERS",
    "SUBSCRIPTION_CLAIM_NEEDS",
    "SUBSCRIPTION_READ_NEEDS",
    "SUBSCRIPTION_WRITE_NEEDS",
    "Action",
    "Allowed",
    "BadSignature",
    "BadToken",
    "Bearer",
    "Decision",
    "Grant",
    "Guard",
    "KeyConfigError",
    "KeySet",
    "KeySource",
    "KeysUnavailable",
    "Need",
    "Presented",
    "Refused",
    "SignedRead",
    "StoredValue",
    "TokenVerifier",
    "Via",
    "decide",
    "mint_token",
    "needs_for",
    "operator_needs",
    "parse_grant",
    "parse_grants",
    "parse_key_set",
    "render_grants",
    "round_expiry",
    "sign",
]
