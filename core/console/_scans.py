"""What costs the console a scan (the store's figures, a stream's forks), gathered at most once
at a time per key and kept a while, so that however many tabs poll, the table is scanned once
per `max_age` at most.

A request that finds its key being gathered gets the last value if there is one (its age says
how old), and otherwise awaits the gathering without holding a worker thread. A gathering that
failed (too long a scan, an AWS error) is remembered as failed for `failure_age` seconds: the
requests meanwhile get the same failure instead of scanning again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool


@dataclass(frozen=True)
class Gathered:
    value: Any
    at: float  # when it was gathered (the clock's seconds)


@dataclass(frozen=True)
class _Failed:
    error: BaseException
    at: float


class ScanCache:
    def __init__(
        self,
        max_age: float,
        *,
        capacity: int = 1,
        failure_age: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_age = max_age
        self.capacity = capacity
        self.failure_age = failure_age
        self.clock = clock
        self._values: OrderedDict[str, Gathered] = OrderedDict()
        self._failures: dict[str, _Failed] = {}
        self._running: dict[str, asyncio.Future[Gathered]] = {}

    async def get(
        self, key: str, gather: Callable[[], Any], fresh_after: float | None = None
    ) -> Gathered:
        """The value for `key`: kept if younger than `fresh_after` (default `max_age`),
        otherwise gathered (`gather` runs in a worker thread), once at a time per key."""
        now = self.clock()
        found = self._values.get(key)
        limit = self.max_age if fresh_after is None else fresh_after
        if found is not None and now - found.at < limit:
            return found
        failed = self._failures.get(key)
        if failed is not None and now - failed.at < self.failure_age:
            raise failed.error
        running = self._running.get(key)
        if running is not None:
            if found is not None:
                return found  # stale while another request gathers it afresh
            return await asyncio.shield(running)
        task = asyncio.ensure_future(self._gather(key, gather))
        # Its failure is read here too: the request that started it may have gone.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._running[key] = task
        return await asyncio.shield(task)

    async def _gather(self, key: str, gather: Callable[[], Any]) -> Gathered:
        try:
            value = await run_in_threadpool(gather)
        except Exception as exc:
            self._failures[key] = _Failed(exc, self.clock())
            raise
        finally:
            self._running.pop(key, None)
        gathered = Gathered(value, self.clock())
        self._failures.pop(key, None)
        self._values[key] = gathered
        self._values.move_to_end(key)
        while len(self._values) > self.capacity:
            self._values.popitem(last=False)
        return gathered
