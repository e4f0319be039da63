"""Reading a whole stream as a catching-up client does, for the benchmarks that time it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx


def responses_from_start(client: httpx.Client, url: str) -> Iterator[httpx.Response]:
    """Catch-up GETs from the start, following `Stream-Next-Offset` until `Stream-Up-To-Date`,
    each response as it comes. A refused GET raises `httpx.HTTPStatusError`."""
    offset = "-1"
    while True:
        answer = client.get(url, params={"offset": offset})
        answer.raise_for_status()
        yield answer
        offset = answer.headers["stream-next-offset"]
        if answer.headers.get("stream-up-to-date") == "true":
            return


def read_from_start(client: httpx.Client, url: str) -> tuple[bytes, int]:
    """`responses_from_start`: the bytes read and the number of responses."""
    pieces = [answer.content for answer in responses_from_start(client, url)]
    return b"".join(pieces), len(pieces)
