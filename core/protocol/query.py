"""The read parameters, as a cache sees them.

A CDN keys reads on the query parameters' names exactly as sent, while a server decodes them:
`%6Fffset=5` is `offset=5` to the server and no parameter at all to the cache. Such a request
could store the answer to one read under another read's key, so a read parameter's name must
be spelled literally; any other spelling is refused.
"""

from __future__ import annotations

from urllib.parse import unquote_plus

from .errors import bad_request

READ_PARAMETERS: tuple[str, ...] = ("cursor", "live", "offset", "until")


def check_parameter_names(raw_query: bytes) -> None:
    """Refuse a query that spells a read parameter's name any way but literally."""
    for pair in raw_query.split(b"&"):
        raw_name = pair.split(b"=", 1)[0]
        try:
            name = unquote_plus(raw_name.decode("ascii"), errors="strict")
        except (UnicodeDecodeError, ValueError):
            continue  # not a read parameter under any spelling
        if name in READ_PARAMETERS and raw_name != name.encode():
            raise bad_request(f"the query parameter {name!r} must be spelled literally")
