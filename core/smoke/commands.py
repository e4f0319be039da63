"""The `dsaws smoke` command line."""

from __future__ import annotations

import argparse
import math
import os
from typing import Any
from urllib.parse import urlsplit

from ...client.commands import TOKEN_VARIABLE
from ._run import SmokeOptions, format_report, run_smoke
from ._verdicts import Outcome


def add_commands(commands: Any) -> None:
    smoke = commands.add_parser(
        "smoke",
        help="check a deployment end to end (create, append, reads, long-poll, SSE, close, "
        "fork, delete; the CDN's cache and collapsing; access control; the origin lock)",
    )
    smoke.add_argument(
        "--url", required=True, type=_http_url, help="the deployment (the CDN's URL, or a server's)"
    )
    smoke.add_argument(
        "--token",
        default=os.environ.get(TOKEN_VARIABLE),
        help="a bearer token with read,append,create,delete,fork on --prefix (default: "
        f"${TOKEN_VARIABLE}, as the stream commands); also checks that a write without it is "
        "refused",
    )
    smoke.add_argument(
        "--origin",
        type=_http_url,
        help="the origin's own URL (the function URL): checks that it is locked",
    )
    smoke.add_argument(
        "--prefix",
        default="smoke/",
        help="where the checks create their streams (default smoke/); under a public read "
        "prefix, the CDN checks also run with access control on",
    )
    smoke.add_argument(
        "--expect-cdn",
        action="store_true",
        help="fail, instead of skipping, the CDN checks when no CDN answers",
    )
    smoke.add_argument(
        "--timeout", type=_seconds, default=20.0, help="seconds per request (default 20)"
    )
    smoke.set_defaults(handler=_smoke)


def _http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"not an http:// or https:// URL: {value!r}")
    return value


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {value!r}")
    return seconds


def _smoke(args: argparse.Namespace) -> int:
    options = SmokeOptions(
        url=args.url,
        token=args.token,
        origin=args.origin,
        prefix=args.prefix,
        expect_cdn=args.expect_cdn,
        timeout=args.timeout,
    )
    checks = run_smoke(options)
    print(format_report(checks))
    return 1 if any(check.outcome is Outcome.FAILED for check in checks) else 0
