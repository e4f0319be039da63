"""Reading a partition's next batch while the one before becomes rows: a read waits on the
origin (the server builds a response, or S3 and DynamoDB answer) while the worker's own work
(Arrow arrays, the JSON parse, handing the batch to Spark) waits on nothing, so the two can
overlap. One item ahead at most, so a partition holds at most two reads' bytes at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
_END = object()


def fetched_ahead(items: Iterator[T]) -> Iterator[T]:
    """`items` in order, each next one pulled on a thread of its own while the caller works on
    the one before. What `items` raises is raised here where that item would have come. A
    caller that stops early leaves the item being fetched to finish in the background (it is
    then dropped): closing waits for no read."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="pipeline-fetch-ahead")
    try:
        # One call at a time: the next is asked for only once the one before has returned.
        pending = pool.submit(next, items, _END)
        while True:
            item = pending.result()
            if item is _END:
                return
            pending = pool.submit(next, items, _END)
            yield item  # type: ignore[misc]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
