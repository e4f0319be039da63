"""In-process wake-ups for tail waiters: a shortcut, never the source of truth.

Lambda instances do not share memory, so waiters always poll the store as well; this only lets
a waiter in the same process see a local append sooner than its next poll. Waiters may live on
different event loops (a buffered host runs one loop per invocation), so wake-ups are handed to
each waiter's own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import defaultdict


class Wakeups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)

    async def wait(self, key: str, timeout: float) -> None:
        """Return after `timeout` seconds, or sooner when `notify(key)` is called."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            self._waiters[key].add(future)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(future, timeout)
        finally:
            with self._lock:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, key: str) -> None:
        with self._lock:
            waiters = self._waiters.pop(key, set())
        for future in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has already closed
                future.get_loop().call_soon_threadsafe(_wake, future)

    def pending(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._waiters.values())


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
