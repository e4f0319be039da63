"""Request bodies read up to a limit: a larger one is refused as soon as it shows."""

from __future__ import annotations

from starlette.requests import Request


async def read_within(request: Request, limit: int) -> bytes | None:
    """The request's body, or None once it is larger than `limit` bytes (by its declared
    Content-Length, or as it arrives), without reading the rest into memory."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    received = bytearray()
    async for piece in request.stream():
        received.extend(piece)
        if len(received) > limit:
            return None
    return bytes(received)
