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
import time
from collections import OrderedDict, defaultdict

# How long the time of a key's last notification is remembered (seconds).
NOTIFIED_REMEMBERED = 60.0


class Wakeups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[asyncio.Future[float]]] = defaultdict(set)
        # key: monotonic time of its last notify, oldest first
        self._notified: OrderedDict[str, float] = OrderedDict()

    async def wait(self, key: str, timeout: float, after: float | None = None) -> float | None:
        """Return after `timeout` seconds (None), or sooner when `notify(key)` is called: then
        the `time.monotonic()` of the notification. `after`: a notification later than this
        one (monotonic seconds) answers at once, even one made before this call, so a waiter
        that learnt of the stream before a notification it was not yet waiting for does not
        sleep through it."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        with self._lock:
            last = self._notified.get(key, 0.0)
            if after is not None and last > after:
                return last
            self._waiters[key].add(future)
        try:
            try:
                return await asyncio.wait_for(future, timeout)
            except TimeoutError:
                return None
        finally:
            with self._lock:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, key: str) -> None:
        at = time.monotonic()
        with self._lock:
            waiters = self._waiters.pop(key, set())
            self._notified.pop(key, None)
            self._notified[key] = at
            notified = self._notified
            while notified and next(iter(notified.values())) < at - NOTIFIED_REMEMBERED:
                notified.popitem(last=False)
        for future in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has already closed
                future.get_loop().call_soon_threadsafe(_wake, future, at)

    def last_notified(self, key: str) -> float:
        """When `notify(key)` was last called (monotonic seconds), if within the last
        `NOTIFIED_REMEMBERED` seconds; 0.0 otherwise."""
        with self._lock:
            return self._notified.get(key, 0.0)

    def pending(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._waiters.values())


def _wake(future: asyncio.Future[float], at: float) -> None:
    if not future.done():
        future.set_result(at)
