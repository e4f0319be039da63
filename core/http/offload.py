"""Store calls, run off the event loop on threads of their own (or on it, `run_here`).

Starlette's `run_in_threadpool` goes through anyio (a capacity limiter, context copies, the
async library's detection): about a fifth of the event loop's time per append under load. The
store's calls need none of it (they keep no context variables), so the stream routes hand them
to asyncio's own executor hand-off, on a pool of their own.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# As many as anyio's default limiter admits: store calls wait on the network (AWS) or on the
# embedded emulator's lock, and a group commit's followers wait for their leader.
_POOL = ThreadPoolExecutor(max_workers=40, thread_name_prefix="store")


async def offload(function: Callable[..., T], *args: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_POOL, functools.partial(function, *args))


async def run_here(function: Callable[..., T], *args: Any) -> T:
    """The same call, made on the event loop: for a store that answers in this process
    without waiting on a network or on another request."""
    return function(*args)
