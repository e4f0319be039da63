"""Waiting at the tail of a stream: the loop behind long-polls and SSE.

Waiters on the same stream in one process share their work (single flight):
- tail checks: they wake on a common grid of poll intervals, and a check that started at or
  after the moment a waiter woke serves it, so N waiters cost one consistent GetItem per
  interval, not N; a local append wakes them all at once, and they share the check after it;
- data reads: the waiters a change wakes at the same offset read the new data once.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from ..storage import ReadBatch, StreamInfo, StreamStore
from .wakeups import NOTIFIED_REMEMBERED, Wakeups

T = TypeVar("T")
# Finished checks are remembered this long (seconds), for waiters that woke before they began.
_REMEMBER_SECONDS = 30.0
# A finished read serves late waiters this long (seconds); at most this many are kept (each
# at most one response's worth of bytes).
_READ_KEPT_SECONDS = 1.0
_READS_KEPT = 16
# Shared work runs on threads of its own (its waiters may live on different event loops), one
# pool for the process however many apps it builds.
_POOL_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(32, thread_name_prefix="shared-store")
        return _POOL


async def _share(future: Future[T]) -> T:
    """Await work other waiters share: a waiter that goes away (its client disconnected) must
    not cancel it for the others, as awaiting a wrapped future directly would."""
    return await asyncio.shield(asyncio.wrap_future(future))


class SharedTailChecks:
    """Single-flight `store.get`: `get(path, not_before)` joins a check of `path` that started
    at or after `not_before` (monotonic seconds), in flight or finished, or starts one."""

    def __init__(self, store: StreamStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._checks: dict[str, tuple[float, Future[StreamInfo | None]]] = {}

    async def get(self, path: str, not_before: float) -> StreamInfo | None:
        with self._lock:
            check = self._checks.get(path)
            if check is None or check[0] < not_before:
                check = (time.monotonic(), _pool().submit(self.store.get, path))
                self._checks[path] = check
                self._forget_old(check[0])
        return await _share(check[1])

    def _forget_old(self, now: float) -> None:
        if len(self._checks) > 1024:
            for path, (started, future) in list(self._checks.items()):
                if future.done() and started < now - _REMEMBER_SECONDS:
                    del self._checks[path]


# incarnation, tail, start, size, and whether a start inside an append means its start
_ReadKey = tuple[str, int, int, int, bool]


class SharedReads:
    """Single-flight `store.read`: identical reads (same incarnation, tail, start and size: the
    same bytes) in flight at once are made once, and a finished one still serves for a moment
    the waiters the same change woke but the event loop reached late. Data below a tail never
    changes, so sharing the answer is exact."""

    def __init__(self, store: StreamStore) -> None:
        self.store = store
        # Re-entrant: a read that finished before its callback was added runs the callback at
        # once, in the thread that holds the lock.
        self._lock = threading.RLock()
        self._reads: dict[_ReadKey, Future[ReadBatch]] = {}
        self._finished: deque[tuple[float, _ReadKey, Future[ReadBatch]]] = deque()

    async def read(
        self, info: StreamInfo, start: int, max_bytes: int, whole: bool = False
    ) -> ReadBatch:
        key = (info.incarnation, info.tail, start, max_bytes, whole)
        with self._lock:
            self._forget_old(time.monotonic())
            future = self._reads.get(key)
            if future is None:
                future = _pool().submit(self.store.read, info, start, max_bytes, whole)
                self._reads[key] = future
                future.add_done_callback(lambda done: self._finish(key, done))
        return await _share(future)

    def _finish(self, key: _ReadKey, done: Future[ReadBatch]) -> None:
        with self._lock:
            if done.cancelled() or done.exception() is not None:
                if self._reads.get(key) is done:  # a failure is not shared after the fact
                    del self._reads[key]
                return
            now = time.monotonic()
            self._finished.append((now + _READ_KEPT_SECONDS, key, done))
            self._forget_old(now)

    def _forget_old(self, now: float) -> None:
        finished = self._finished
        while finished and (finished[0][0] <= now or len(finished) > _READS_KEPT):
            _, key, done = finished.popleft()
            if self._reads.get(key) is done:
                del self._reads[key]


class TailWatcher:
    def __init__(self, store: StreamStore, wakeups: Wakeups, poll_interval: float) -> None:
        self.wakeups = wakeups
        self.poll_interval = poll_interval
        self.checks = SharedTailChecks(store)

    async def wait_for_change(self, path: str, position: int, budget: float) -> StreamInfo | None:
        """Check the stream item until data arrives past `position`, the stream closes or goes
        away, or `budget` seconds pass; one consistent GetItem per poll interval, shared with
        the other waiters on `path`. Returns the last snapshot read (None when gone)."""
        deadline = time.monotonic() + budget
        # The notifications a check here has seen the effect of. The caller's snapshot may come
        # from a check begun before this process's last append to the stream, which notified
        # before this waiter listened: at first any remembered notification wakes it, and it
        # checks again (sharing a check begun after that notification, which usually exists).
        seen = 0.0
        while True:
            now = time.monotonic()
            until = min(self._next_tick(now), deadline)
            notified_at = await self.wakeups.wait(path, max(0.0, until - now), after=seen)
            if notified_at is not None:
                not_before = seen = notified_at  # the check must see what the notifier committed
            elif until < deadline:
                not_before = until  # a grid tick: every waiter of the stream shares it
            else:
                # The deadline is each waiter's own: a check less than an interval old (the
                # last tick's) answers it, so waiters that started together end together.
                not_before = deadline - self.poll_interval
            info = await self.checks.get(path, not_before)
            if info is None or info.soft_deleted or info.tail > position or info.closed:
                return info
            if time.monotonic() >= deadline:
                return info

    async def snapshot_for_waiting(self, path: str) -> StreamInfo | None:
        """The stream item for a reader that will wait at the tail if the stream is as it was:
        a shared check at most one poll interval old and begun after this process's last change
        to `path`. A waiter could not do better: it learns of other instances' appends by
        polling at that interval. So the readers a delivery sends back at once (a fan-out)
        share one GetItem, not one each. The caller uses it only if it would wait."""
        now = time.monotonic()
        # Never older than the last notification remembered: it may be past a local change.
        window = min(self.poll_interval, NOTIFIED_REMEMBERED)
        not_before = max(now - window, self.wakeups.last_notified(path))
        return await self.checks.get(path, not_before)

    def _next_tick(self, now: float) -> float:
        """The next instant on the grid every waiter in this process wakes on."""
        return next_tick(now, self.poll_interval)


def next_tick(now: float, interval: float) -> float:
    """The next instant after `now` on a grid of `interval` seconds, the same for every caller
    in this process (so that callers waking on it share what they do then)."""
    return (math.floor(now / interval) + 1) * interval
