"""`list_streams`: the stream paths under a prefix, through this server's listing extension."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._sync import DurableStream
from ._wire import Request


def list_streams(base_url: str, prefix: str = "", **options: Any) -> Iterator[str]:
    """The paths of the streams under `prefix` on a server at `base_url` (the URL stream paths
    are relative to, such as http://host/v1/stream), through this server's listing extension.
    Options are those of `DurableStream` (headers, retry, client...)."""
    with DurableStream(base_url.rstrip("/"), **options) as lister:
        params = {"prefix": prefix}
        while True:
            page = lister._send(Request("GET", params=params)).json()
            yield from page["streams"]
            if page["next"] is None:
                return
            params = {"prefix": prefix, "cursor": page["next"]}
