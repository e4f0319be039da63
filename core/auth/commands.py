"""`dsaws token` and `dsaws sign-url`: credentials minted from the configured HMAC keys
(DS_AUTH_SECRET, DS_AUTH_SECRET_ID or DS_AUTH_SECRET_PARAMETER, as the function reads them)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any
from urllib.parse import quote, urlencode

from ..config import Settings, load_settings
from .grants import parse_grant
from .keys import KeyConfigError, KeySet, KeysUnavailable, hmac_key_source
from .signed_urls import round_expiry, sign

DEFAULT_URL_STEP = 300


def add_commands(commands: Any) -> None:
    token = commands.add_parser(
        "token", help="mint a bearer token (HS256) from the configured keys"
    )
    token.add_argument(
        "grants",
        nargs="+",
        metavar="GRANT",
        help="what the bearer may do, as actions:prefix (read,append:chat/ or read:*)",
    )
    token.add_argument("--lifetime", type=_seconds, default=3600, help="seconds (default 3600)")
    token.add_argument("--subject", help="the sub claim (who the token is for)")
    token.add_argument("--kid", help="sign with this key of the set (default: the first)")
    token.set_defaults(handler=_token)

    url = commands.add_parser("sign-url", help="make a signed read URL for a stream or a prefix")
    url.add_argument("stream", help="the stream's path under the base URL (or a prefix)")
    url.add_argument("--prefix", action="store_true", help="cover every stream under it")
    url.add_argument("--lifetime", type=_seconds, default=3600, help="seconds (default 3600)")
    url.add_argument(
        "--step",
        type=_seconds,
        default=DEFAULT_URL_STEP,
        help="round the expiry up to a multiple of this many seconds, so readers handed a URL "
        f"for the same stream share it and the CDN's cache (default {DEFAULT_URL_STEP})",
    )
    url.add_argument("--url", help="the streams' base URL (default: print the query only)")
    url.set_defaults(handler=_sign_url)


def _seconds(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {value!r}")
    return int(value)


def _keys(settings: Settings) -> KeySet:
    source = hmac_key_source(settings.key_settings)
    if source is None:
        raise KeyConfigError(
            "no HMAC keys are configured: set DS_AUTH_SECRET (the key set itself), "
            "DS_AUTH_SECRET_ID (Secrets Manager) or DS_AUTH_SECRET_PARAMETER (SSM)"
        )
    return source.current()


def _token(args: argparse.Namespace) -> int:
    from .tokens import mint_token

    grants = [parse_grant(text) for text in args.grants]
    bad = [text for text, grant in zip(args.grants, grants, strict=True) if grant is None]
    if bad:
        return _fail("token", f"not a grant (actions:prefix): {', '.join(bad)}")
    settings = load_settings()
    try:
        minted = mint_token(
            _keys(settings),
            [g for g in grants if g is not None],
            lifetime=args.lifetime,
            audience=settings.auth_audience,
            issuer=settings.auth_issuer,
            subject=args.subject,
            claim=settings.auth_claim,
            kid=args.kid,
        )
    except (KeyConfigError, KeysUnavailable) as exc:
        return _fail("token", str(exc))
    print(minted)
    return 0


def _sign_url(args: argparse.Namespace) -> int:
    settings = load_settings()
    try:
        keys = _keys(settings)
    except (KeyConfigError, KeysUnavailable) as exc:
        return _fail("sign-url", str(exc))
    target = args.stream.lstrip("/")
    if not target:
        return _fail("sign-url", "name a stream (or, with --prefix, a prefix; * for every stream)")
    expires = round_expiry(time.time(), args.lifetime, args.step)
    query = urlencode(sign(keys, target, expires, prefix=args.prefix))
    if args.url is None or args.prefix:
        # A prefix's parameters go on the URL of any stream under it.
        print(f"?{query}")
    else:
        print(f"{args.url.rstrip('/')}/{quote(target)}?{query}")
    return 0


def _fail(command: str, message: str) -> int:
    print(f"dsaws {command}: {message}", file=sys.stderr)
    return 2
