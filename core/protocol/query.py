"""Query parameters, as a cache sees them.

A CDN keys reads on the query parameters' names exactly as sent, while a server decodes them:
`%6Fffset=5` is `offset=5` to the server and no parameter at all to the cache. Such a request
could store the answer to one read under another read's key (or a signed read's answer under an
anonymous read's key), so the name of every parameter in the cache key must be spelled
literally; any other spelling is refused.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import unquote_plus

from .errors import bad_request

READ_PARAMETERS: tuple[str, ...] = ("cursor", "live", "offset", "until")


def check_parameter_names(raw_query: bytes, names: Collection[str]) -> None:
    """Refuse a query that spells one of `names` any way but literally."""
    for pair in raw_query.split(b"&"):
        raw_name = pair.split(b"=", 1)[0]
        try:
            name = unquote_plus(raw_name.decode("ascii"), errors="strict")
        except (UnicodeDecodeError, ValueError):
            continue  # none of the names under any spelling
        if name in names and raw_name != name.encode():
            raise bad_request(f"the query parameter {name!r} must be spelled literally")
