"""What this process last committed to each stream: a guess that saves a read, never a fact.

A writer appending to the same stream again can commit straight away on the remembered tail;
every commit is conditioned on the state it assumed, so a stale guess only costs a retry with a
fresh read. Lambda instances never share this, and correctness never depends on it.

It also remembers which streams are hot (other writers append to them, `core.storage._append`):
seen when a direct commit lost a race, or a reserved range's number was more than one past
the last this process was given.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from ..protocol.producer import ProducerState
from .model import StreamInfo

_NO_PRODUCER = ""


class RecentWrites:
    def __init__(self, capacity: int = 4096, hot_seconds: float = 5.0) -> None:
        self.capacity = capacity
        self.hot_seconds = hot_seconds
        self._hot_until: OrderedDict[str, float] = OrderedDict()
        self._last_range: dict[str, int] = {}
        self._lock = threading.Lock()
        self._streams: OrderedDict[str, tuple[StreamInfo, dict[str, ProducerState | None]]] = (
            OrderedDict()
        )

    def guess(
        self, path: str, producer_id: str | None
    ) -> tuple[StreamInfo, ProducerState | None] | None:
        with self._lock:
            entry = self._streams.get(path)
            if entry is None:
                return None
            info, producers = entry
            key = producer_id or _NO_PRODUCER
            if producer_id is not None and key not in producers:
                return None  # never seen this producer here: read its state
            return info, producers.get(key)

    def remember(
        self, info: StreamInfo, producer_id: str | None, producer: ProducerState | None
    ) -> None:
        with self._lock:
            entry = self._streams.pop(info.path, None)
            producers = entry[1] if entry and entry[0].incarnation == info.incarnation else {}
            if producer_id is not None:
                producers[producer_id] = producer
            self._streams[info.path] = (info, producers)
            while len(self._streams) > self.capacity:
                self._streams.popitem(last=False)

    def forget(self, path: str) -> None:
        with self._lock:
            self._streams.pop(path, None)

    def hot(self, path: str) -> bool:
        with self._lock:
            return self._hot_until.get(path, 0.0) > time.monotonic()

    def mark_hot(self, path: str) -> None:
        with self._lock:
            self._mark_hot(path)

    def observe_range(self, path: str, info: StreamInfo, number: int) -> None:
        """A range this process reserved: a number more than one past its last one here means
        others reserved in between (numbers are per incarnation)."""
        key = f"{info.incarnation}/{path}"
        with self._lock:
            last = self._last_range.get(key)
            self._last_range[key] = number
            if len(self._last_range) > self.capacity:
                self._last_range.pop(next(iter(self._last_range)))
            if last is None or number > last + 1:
                self._mark_hot(path)

    def _mark_hot(self, path: str) -> None:
        self._hot_until.pop(path, None)
        self._hot_until[path] = time.monotonic() + self.hot_seconds
        while len(self._hot_until) > self.capacity:
            self._hot_until.popitem(last=False)
