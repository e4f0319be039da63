"""What this process last committed to each stream: a guess that saves a read, never a fact.

A writer appending to the same stream again can commit straight away on the remembered tail;
every commit is conditioned on the state it assumed, so a stale guess only costs a retry with a
fresh read. Lambda instances never share this, and correctness never depends on it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..protocol.producer import ProducerState
from .model import StreamInfo

_NO_PRODUCER = ""


class RecentWrites:
    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
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
