"""Waiting at the tail of a stream: the loop behind long-polls and SSE."""

from __future__ import annotations

import asyncio

from starlette.concurrency import run_in_threadpool

from ..storage import StreamInfo, StreamStore
from .wakeups import Wakeups


class TailWatcher:
    def __init__(self, store: StreamStore, wakeups: Wakeups, poll_interval: float) -> None:
        self.store = store
        self.wakeups = wakeups
        self.poll_interval = poll_interval

    async def wait_for_change(self, path: str, position: int, budget: float) -> StreamInfo | None:
        """Poll the stream item until data arrives past `position`, the stream closes or goes
        away, or `budget` seconds pass; one consistent GetItem per poll interval. Returns the
        last snapshot read (None when the stream is gone)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        while True:
            remaining = deadline - loop.time()
            if remaining > 0:
                await self.wakeups.wait(path, min(self.poll_interval, remaining))
            info = await run_in_threadpool(self.store.get, path)
            if info is None or info.soft_deleted or info.tail > position or info.closed:
                return info
            if loop.time() >= deadline:
                return info
