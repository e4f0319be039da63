"""The SSE session loop, against a store that cannot make progress: it must end, not spin."""

from __future__ import annotations

import asyncio

from durable_streams_aws.core.http.live import SharedReads, TailWatcher
from durable_streams_aws.core.http.sse import SsePlan, SseSessions
from durable_streams_aws.core.http.wakeups import Wakeups
from durable_streams_aws.core.storage import ReadBatch, StreamInfo

INFO = StreamInfo(
    path="p",
    incarnation="i",
    content_type="application/json",
    tail=10,
    closed=False,
    closed_by=None,
    last_stream_seq=None,
    ttl_seconds=None,
    expires_at=None,
    last_access=0.0,
    created_at=0.0,
)


class StuckStore:
    """The tail is ahead, yet every read returns nothing (data that cannot be served)."""

    def __init__(self) -> None:
        self.reads = 0

    def get(self, path: str) -> StreamInfo:
        return INFO

    def read(self, info: StreamInfo, start: int, max_bytes: int, whole: bool = False) -> ReadBatch:
        self.reads += 1
        return ReadBatch(start, start, messages=())


def test_a_read_that_makes_no_progress_ends_the_session() -> None:
    store = StuckStore()
    sessions = SseSessions(
        SharedReads(store), TailWatcher(store, Wakeups(), 0.05), 1024, 16_000, lambda *_: "1"
    )  # type: ignore[arg-type]

    async def run() -> list[bytes]:
        plan = SsePlan("p", 0, lifetime=30.0, stop_after_data=False)
        return [event async for event in sessions.events(INFO, plan)]

    events = asyncio.run(asyncio.wait_for(run(), timeout=5))
    assert events == [] and store.reads == 1
    assert sessions.active == 0
