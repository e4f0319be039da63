"""Reading a partition's next batch while the one before becomes rows: a read waits on the
origin (the server builds a response, or S3 and DynamoDB answer) while the worker's own work
(Arrow arrays, the JSON parse, handing the batch to Spark) waits on nothing, so the two can
overlap. One item ahead at most: a partition holds one read more than it would otherwise.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

T = TypeVar("T")
_END = object()


def fetched_ahead(items: Iterator[T]) -> Iterator[T]:
    """`items` in order, each next one pulled on a thread of its own while the caller works on
    the one before. What `items` raises is raised here where that item would have come. A
    caller that stops early waits for no read: the one under way finishes in the background,
    is dropped, and `items` is closed; no other is started. The thread is a daemon, so a
    process that exits meanwhile does not wait for it either."""
    asks: queue.SimpleQueue[bool] = queue.SimpleQueue()  # True: the next item; False: stop
    answers: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()

    def fetch() -> None:
        # One call at a time, each asked for once the one before has been handed over.
        while asks.get():
            try:
                item = next(items, _END)
            except BaseException as failure:  # handed to the caller, raised there
                answers.put((_END, failure))
                return
            answers.put((item, None))
            if item is _END:
                return
        close = getattr(items, "close", None)
        if close is not None:
            close()

    threading.Thread(target=fetch, name="pipeline-fetch-ahead", daemon=True).start()
    asks.put(True)
    try:
        while True:
            item, failure = answers.get()
            if failure is not None:
                raise failure
            if item is _END:
                return
            asks.put(True)
            yield item
    finally:
        asks.put(False)
