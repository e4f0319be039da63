"""Listing the streams under a path prefix: this server's extension for bulk jobs (a Spark
export of every stream under `orders/`, for instance). It changes nothing for other clients.

    GET {base_path}?prefix=orders/&cursor=...
    200 {"streams": ["orders/1", "orders/2"], "next": "<cursor>" | null}

Each answer is one page of a scan of the store: follow `next` until it is null. A page may
be empty while `next` is not (the scan passed over other items), and the listing is a scan's
view: streams created or deleted while it runs may or may not be listed.

It is off unless the deployment turns it on (`DS_LISTING=true`): it reveals every stream's
path to whoever may call it, and each page costs a scan. A cursor is the table key where the
scan stopped, so it names some item of the table (a stream path, or an incarnation id).
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..auth.signed_urls import SIGNED_URL_PARAMETERS
from ..protocol import caching
from ..protocol.errors import bad_request
from ..protocol.paths import parse_path_prefix
from ..storage import InvalidCursor, StreamStore

# Items one page's scan reads (streams, chunks and producers alike): about 1 MB of keys and
# attributes at most, which a Lambda invocation reads in well under a second.
PAGE_ITEMS = 1000


async def list_streams(request: Request, store: StreamStore) -> Response:
    prefix, cursor = _parse(request)
    try:
        page = await run_in_threadpool(store.list_streams, prefix, cursor, PAGE_ITEMS)
    except InvalidCursor:
        raise bad_request("cursor is not one this server gave out") from None
    body = json.dumps({"streams": list(page.paths), "next": page.cursor})
    # Listings change with every create and delete, and are not the protocol's cacheable reads.
    headers = {"Cache-Control": caching.NO_STORE}
    return Response(body, status_code=200, media_type="application/json", headers=headers)


def _parse(request: Request) -> tuple[str, str | None]:
    query = request.query_params
    unknown = sorted(set(query) - {"prefix", "cursor", *SIGNED_URL_PARAMETERS})
    if unknown:
        raise bad_request(f"a listing takes prefix and cursor only, not {', '.join(unknown)}")
    prefixes, cursors = query.getlist("prefix"), query.getlist("cursor")
    if len(prefixes) > 1 or len(cursors) > 1:
        raise bad_request("prefix and cursor may each be given once")
    prefix = parse_path_prefix(prefixes[0] if prefixes else "")
    return prefix, (cursors[0] if cursors else None)
