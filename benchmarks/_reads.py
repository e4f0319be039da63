"""Reading a whole stream as a catching-up client does, for the benchmarks that time it."""

from __future__ import annotations

import httpx


def read_from_start(client: httpx.Client, url: str) -> tuple[bytes, int]:
    """Catch-up GETs from the start, following `Stream-Next-Offset` until `Stream-Up-To-Date`;
    the bytes read and the number of responses. A refused GET raises `httpx.HTTPStatusError`."""
    pieces: list[bytes] = []
    offset = "-1"
    while True:
        answer = client.get(url, params={"offset": offset})
        answer.raise_for_status()
        pieces.append(answer.content)
        offset = answer.headers["stream-next-offset"]
        if answer.headers.get("stream-up-to-date") == "true":
            return b"".join(pieces), len(pieces)
