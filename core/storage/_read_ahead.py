"""Reading ahead: a read that takes chunks held in S3 whole fetches the next few objects while
it takes the ones before them, instead of waiting for each GET in turn (appends larger than
an inline chunk are an object each, and S3 answers each GET in tens of milliseconds).

Only objects the read is sure to take whole are fetched ahead, and chunk items are pulled
from the item pages no further than the read would pull them itself: while it can be
predicted, chunk by chunk, that the read takes the chunk whole and goes on to the next one.
The prediction follows the read's own rules (`ChunkStore._read`): the chunk starts where the
read stands, its bytes (for JSON, with a separator per message) fit what is left of the
budget, and it ends by the segment's end. A sealed segment is read by the read itself (ranged
GETs of its pages), never fetched ahead, but one whose pages the read takes to its end from
where it stands (a page's start: where a read before it stopped) is passed over: so a
catch-up read through an open stream's sealed history fetches its newest appends, still
chunks in S3, at once. Anything else (a void range, a chunk or segment the read skips or
cuts, a chunk whose message count is not in its item) ends the prediction, and the read goes
on at its own pace. So it makes the same AWS calls, some of them at once. A failed GET
(`ObjectGone`: an object sealed away and collected) is raised where the read takes that
chunk or segment, as its own GET would have raised it there; the read then starts again from
the items that replaced it, and the objects it had fetched ahead of that point are fetched
again if it still needs them (a race with the collector, whose grace period makes it rare)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import pairwise

from ._chunk_layout import Chunk

# Objects one read has in flight at most, and GETs the process runs ahead at once (for all
# its reads together: a Lambda instance serves one request at a time, a server many; each
# read makes the GET of the chunk it takes next itself, as before).
READ_AHEAD_OBJECTS = 8
_READ_AHEAD_THREADS = 32

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_READ_AHEAD_THREADS, thread_name_prefix="read-ahead")
        return _pool


@dataclass
class ReadPlan:
    """Where the read stands and what is left of its budget, after the chunks pulled so far,
    while it is sure to have taken each of them whole (`sure`)."""

    at: int
    budget: int
    end: int  # the segment's end: the read moves on to the next segment there
    json_mode: bool
    sure: bool = True

    def takes_whole(self, chunk: Chunk) -> bool:
        """Whether the read takes all of `chunk` (the next one it meets) from where it stands;
        the plan moves past it, or stops being sure."""
        cost = self._cost(chunk)
        whole = (
            self.sure
            and cost is not None
            and not chunk.void
            and chunk.end <= self.end
            and cost <= self.budget
        )
        if not whole:
            self.sure = False
            return False
        assert cost is not None
        self.at, self.budget = chunk.end, self.budget - cost
        # With its budget spent, or at the segment's end, the read pulls nothing more here.
        self.sure = self.budget > 0 and self.at < self.end
        return True

    def _cost(self, chunk: Chunk) -> int | None:
        """What taking the rest of the chunk from `at` spends of the budget (None: not known
        from its item, or it does not start there)."""
        if chunk.sealed:
            return self._segment_cost(chunk)
        if chunk.start != self.at:
            return None
        size = chunk.end - chunk.start
        if not self.json_mode:
            return size
        return None if chunk.lengths is None else size + len(chunk.lengths)

    def _segment_cost(self, segment: Chunk) -> int | None:
        """What a read spends taking a segment's pages from `at` to its end (None: no page
        starts there, or they are not laid end to end to the segment's end). A read that
        stopped at a page's end goes on from the next page: that is the common case."""
        pages = segment.pages or ()
        first = next((i for i, page in enumerate(pages) if page.position == self.at), None)
        if first is None or pages[-1].end != segment.end:
            return None
        taken = pages[first:]
        if any(a.end != b.position for a, b in pairwise(taken)):
            return None
        # Each page as the read estimates it (`Page.served_size`): for JSON, a separator per
        # message; a byte stream's pages cost their bytes.
        if self.json_mode:
            return sum(page.served_size(page.position, segment.end) for page in taken)
        return segment.end - self.at


def read_ahead(
    chunks: Iterator[Chunk], fetch: Callable[[str], bytes], plan: ReadPlan
) -> Iterator[Chunk]:
    """`chunks` as they come, the objects of those `plan` predicts the read takes whole fetched
    ahead with `fetch` (their bytes put in `inline`, as a chunk held in its item)."""
    pending: deque[tuple[Chunk, Future[bytes] | None]] = deque()
    try:
        while True:
            while len(pending) < READ_AHEAD_OBJECTS and (not pending or plan.sure):
                chunk = next(chunks, None)
                if chunk is None:
                    break
                whole = plan.takes_whole(chunk)
                future = None
                # The chunk taken next is fetched by the read itself, on its own thread, and
                # so is every segment (pages by ranged GETs).
                ahead = whole and pending and not chunk.sealed
                if ahead and chunk.inline is None and chunk.s3_key is not None:
                    future = _executor().submit(fetch, chunk.s3_key)
                pending.append((chunk, future))
            if not pending:
                return
            chunk, future = pending.popleft()
            if future is not None:
                chunk = replace(chunk, inline=future.result())
            yield chunk
    finally:
        for _, future in pending:
            if future is not None:
                future.cancel()
