"""SSE sessions: catch up from an offset, then follow the stream's tail.

One generator serves both hosts. Under uvicorn it streams for a lifetime (about a minute) and
then ends so clients reconnect through the CDN. Under buffered hosts (Lambda through Mangum) it
runs in bounded-window mode: it ends as soon as it has sent data or the closed signal, or when
the window ends, and the client reconnects from the last control event's offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from ..protocol.offsets import format_offset
from ..protocol.sse import control_event, data_event, uses_base64
from ..storage import ReadBatch, StreamInfo
from .envelope import fit_read
from .live import SharedReads, TailWatcher
from .responses import read_body


@dataclass(frozen=True)
class SsePlan:
    path: str
    position: int
    lifetime: float
    stop_after_data: bool  # bounded-window mode
    client_cursor: str | None = None
    whole: bool = False  # the offset was a plain token: inside an append means its start
    # A compacted stream's snapshot, sent first as one event (`position` is where it ends).
    prefix: tuple[bytes, ...] = ()


class SseSessions:
    """Runs SSE sessions and counts the live ones, so tests can see none are left behind."""

    def __init__(
        self,
        reads: SharedReads,
        watcher: TailWatcher,
        max_read_bytes: int,
        event_budget: int,
        cursor_for: Callable[[int, str | None], str],
    ) -> None:
        self.reads = reads
        self.watcher = watcher
        self.max_read_bytes = max_read_bytes
        self.event_budget = event_budget  # the most a data event may weigh at the front door
        self.cursor_for = cursor_for
        self.active = 0

    async def events(self, info: StreamInfo, plan: SsePlan) -> AsyncIterator[bytes]:
        self.active += 1
        try:
            async for event in self._session(info, plan):
                yield event
        finally:
            self.active -= 1

    async def _session(self, info: StreamInfo, plan: SsePlan) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + plan.lifetime
        position = plan.position
        whole = plan.whole  # the first read only: later ones start where a batch ended
        inside = False  # the position lies inside an append (a batch was cut there)
        announced = False  # has a control event told the client where it stands?
        current: StreamInfo | None = info
        if plan.prefix:
            snapshot = ReadBatch(position, position, messages=plan.prefix)
            at_tail = position >= info.tail
            event = data_event(read_body(snapshot), info.content_type)
            yield event + self._control(info, position, at_tail, plan)
            announced = True
            if (info.closed and at_tail) or plan.stop_after_data:
                return
        while current is not None and not current.soft_deleted:
            if position < current.tail:
                # Shared: every session woken by the same append reads the same new bytes.
                batch = await self.reads.read(current, position, self.max_read_bytes, whole)
                event, batch = self._data_event(batch, current.content_type)
                if batch.end == batch.start:
                    return  # nothing could be read although the tail is ahead: never spin
                position, inside, whole = batch.end, batch.inside, False
                at_tail = position >= current.tail
                # One write for the pair: a data event is never seen without its control.
                yield event + self._control(current, position, at_tail, plan, inside)
                announced = True
                if (current.closed and at_tail) or plan.stop_after_data:
                    return
                continue
            if current.closed:
                yield self._control(current, position, True, plan)
                return
            if not announced:
                yield self._control(current, position, True, plan)
                announced = True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            current = await self.watcher.wait_for_change(plan.path, position, remaining)
            if current is not None and current.tail <= position and not current.closed:
                return  # the lifetime ended with nothing new

    def _data_event(self, batch: ReadBatch, content_type: str) -> tuple[bytes, ReadBatch]:
        """The data event for as much of `batch` as one event may carry, and that part."""

        def render(part: ReadBatch) -> bytes:
            return data_event(read_body(part), content_type)

        text = not uses_base64(content_type)
        fitted, event = fit_read(batch, render, "text/event-stream", self.event_budget, text=text)
        return event, fitted

    def _control(
        self,
        info: StreamInfo,
        position: int,
        up_to_date: bool,
        plan: SsePlan,
        inside: bool = False,
    ) -> bytes:
        closed = info.closed and position >= info.tail
        cursor = None if closed else self.cursor_for(position, plan.client_cursor)
        return control_event(format_offset(position, inside), cursor, up_to_date, closed)
