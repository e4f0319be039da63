"""In-process wake-ups for long-poll waiters: a shortcut, never the source of truth.

Lambda instances do not share memory, so waiters always poll the store as well; this only lets
a waiter in the same process see a local append sooner than its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict


class Wakeups:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)

    async def wait(self, key: str, timeout: float) -> None:
        """Return after `timeout` seconds, or sooner when `notify(key)` is called."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters[key]
        waiters.add(future)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout)
        finally:
            waiters.discard(future)
            if not waiters:
                self._waiters.pop(key, None)

    def notify(self, key: str) -> None:
        for future in self._waiters.pop(key, set()):
            if not future.done():
                future.set_result(None)
