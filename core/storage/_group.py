"""Group commit: the direct appends of one stream waiting in this process, taken together.

Writers of one stream in one process would only lose races to each other; instead they queue,
and one of them (the leader) takes everything queued and commits it at once (see
`Appender._direct_group`), each append still answered on its own. The leader then hands the
lead to the first append still queued, so nobody serves others for longer than one batch past
its own. A stream with nothing queued holds no state here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# At most this many appends in one batch (a transaction holds 100 actions: each append may
# write a chunk and a producer item).
MAX_BATCH = 32


@dataclass
class Waiting:
    """One append in the queue: what it asks, and, once a leader has taken it, its answer."""

    request: Any
    answer: Any = None
    error: BaseException | None = None
    answered: bool = False
    lead: bool = False  # handed the lead: it takes the queue next
    wake: threading.Event = field(default_factory=threading.Event)


Commit = Callable[[str, Sequence[Waiting]], None]


class GroupCommits:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, list[Waiting]] = {}
        self._led: set[str] = set()

    def submit(self, path: str, request: Any, commit: Commit) -> Any:
        """Queue `request` and return its answer: `commit(path, batch)` sets the answer of
        every append of the batch it is given (an exception it raises is the answer of each
        append it did not answer)."""
        me = Waiting(request)
        with self._lock:
            self._queues.setdefault(path, []).append(me)
            leading = path not in self._led
            if leading:
                self._led.add(path)
        while not leading:
            me.wake.wait()
            me.wake.clear()
            if me.answered:
                break
            leading = me.lead  # handed the lead before its turn came
        if leading:
            self._lead(path, me, commit)
        if me.error is not None:
            raise me.error
        return me.answer

    def _lead(self, path: str, me: Waiting, commit: Commit) -> None:
        while not me.answered:
            with self._lock:
                queue = self._queues[path]
                batch, queue[:] = queue[:MAX_BATCH], queue[MAX_BATCH:]
            try:
                commit(path, batch)
            except BaseException as error:  # every append it did not answer fails with it
                for waiting in batch:
                    if not waiting.answered:
                        waiting.error, waiting.answered = error, True
            for waiting in batch:
                waiting.answered = True
                if waiting is not me:
                    waiting.wake.set()
        with self._lock:
            queue = self._queues[path]
            if queue:
                queue[0].lead = True
                queue[0].wake.set()
            else:
                del self._queues[path]
                self._led.discard(path)

    def active(self) -> int:
        """Streams with appends queued or being committed."""
        with self._lock:
            return len(self._led)
