"""Noticing that a waiting request's client has gone.

A long-poll that only waits at the tail would otherwise go on polling the store for its whole
budget after its client closed the connection. uvicorn tells the app by answering `receive()`
with `http.disconnect` once the request's body has been read; Mangum never does (its `receive`
waits for ever after the body), so under Lambda a wait runs to its end, as the invocation does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from enum import Enum
from typing import Any, Literal, TypeVar

from starlette.types import Receive

T = TypeVar("T")


class ClientGone(Enum):
    GONE = "gone"


CLIENT_GONE = ClientGone.GONE
# nginx's status for a request whose client closed the connection before the answer: never
# sent (nobody is there to read it), only logged.
CLIENT_CLOSED_REQUEST = 499


async def unless_client_leaves(
    receive: Receive, work: Coroutine[Any, Any, T]
) -> T | Literal[ClientGone.GONE]:
    """What `work` returns, or `CLIENT_GONE` (and `work` cancelled) if the client disconnects
    first. Only for requests whose body nobody reads: the body's messages are consumed here."""
    working = asyncio.ensure_future(work)
    watching = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait((working, watching), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (working, watching):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if working.done() and not working.cancelled():
        return working.result()
    return CLIENT_GONE


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
