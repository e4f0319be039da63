"""Reading ahead: a read that takes chunks held in S3 whole fetches the next few objects while
it takes the ones before them, instead of waiting for each GET in turn (appends larger than
an inline chunk are an object each, and S3 answers each GET in tens of milliseconds).

Only objects the read is sure to take whole are fetched ahead: chunks that start at or after
where it starts and end by where its budget ends. The chunks are pulled from the item pages
no further than the read would have pulled them itself, so it makes the same AWS calls as
before, only some of them at once."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

from ._chunk_layout import Chunk

# Objects one read has in flight at most, and GETs the process runs ahead at once (for all
# its reads together: a Lambda instance serves one request at a time, a server many).
READ_AHEAD_OBJECTS = 8
_READ_AHEAD_THREADS = 16

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_READ_AHEAD_THREADS, thread_name_prefix="read-ahead")
        return _pool


def read_ahead(
    chunks: Iterator[Chunk], fetch: Callable[[str], bytes], start: int, until: int
) -> Iterator[Chunk]:
    """`chunks` as they come, each whole object among them that lies within [start, until)
    already fetched with `fetch` (its bytes in `inline`, as a chunk held in its item). A
    fetch's failure (an object sealed away meanwhile: `ObjectGone`) is raised where the chunk
    is taken, as the read's own GET would have raised it."""
    pending: deque[tuple[Chunk, Future[bytes] | None]] = deque()
    exhausted = False
    try:
        while True:
            while not exhausted and len(pending) < READ_AHEAD_OBJECTS:
                if pending and not _leads_on(pending[-1][0], until):
                    break  # the read may stop at that chunk: pull no further than it would
                chunk = next(chunks, None)
                if chunk is None:
                    exhausted = True
                    break
                future = None
                if chunk.s3_key is not None and _taken_whole(chunk, start, until):
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


def _taken_whole(chunk: Chunk, start: int, until: int) -> bool:
    """Whether the read will take all of this chunk's object (so it may be fetched ahead)."""
    held_in_s3 = chunk.inline is None and chunk.s3_key is not None
    whole = start <= chunk.start < chunk.end <= until
    return held_in_s3 and whole and not (chunk.void or chunk.sealed)


def _leads_on(chunk: Chunk, until: int) -> bool:
    """Whether a read that reaches this chunk goes on to the next one: it ends before the
    read's budget does, and holds data (at a void range a read that has data ends)."""
    return not chunk.void and chunk.end < until
