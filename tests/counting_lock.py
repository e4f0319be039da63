"""A lock that counts how often it is taken, for tests of how often code takes a lock."""

from __future__ import annotations

import threading


class CountingLock:
    def __init__(self) -> None:
        self.taken = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self.taken += 1
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
