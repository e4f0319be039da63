"""A producer's requests to one stream, in this process, taken in sequence order.

A pipelining producer's requests overtake each other on their way (over several connections),
so a request whose predecessors are in flight here waits for them to be answered, and one whose
predecessor has not arrived yet waits a moment for it, instead of being refused for a gap that
only the order of arrival made. Waiting is cheap for the process: an HTTP request waits on the
event loop (`enter_async`), holding no thread of the store's pool, so a writer sending requests
that will never be in order cannot take the pool from the other streams' requests.

What this process last saw stored for each producer also tells which requests are likely to be
accepted (`vouches`): the store reads the producer's state before reserving a range for any
other, so that one it must refuse costs a read, not a reservation and a void.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

from ..protocol.producer import ProducerState

# How far ahead of the last stored seq a request still waits for its predecessors here.
PIPELINE_DEPTH = 64
# How long a producer request waits for a predecessor that is not in flight here yet.
ARRIVAL_WAIT_SECONDS = 0.2
# Producers remembered (the oldest forgotten first).
_REMEMBERED = 65536

_Key = tuple[str, str]  # (stream path, producer id)


def within_pipeline(stored: ProducerState | None, epoch: int, seq: int) -> bool:
    """Whether a request of (`epoch`, `seq`) is at most `PIPELINE_DEPTH` ahead of the producer
    state `stored` (None: a producer with nothing stored, whose first seq is 0): one a
    pipelining producer may send before its predecessors are stored."""
    last = -1 if stored is None else stored.last_seq
    if stored is not None and stored.epoch != epoch:
        return epoch > stored.epoch and seq == 0
    return last < seq <= last + 1 + PIPELINE_DEPTH


class ProducerOrder:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._last: dict[_Key, ProducerState] = {}
        self._in_flight: dict[_Key, list[tuple[int, int]]] = {}
        self._listeners: dict[_Key, set[Callable[[], None]]] = {}

    def vouches(self, path: str, producer_id: str, epoch: int, seq: int) -> bool:
        """Whether what this process last saw stored for the producer makes the request the
        one it expects next: the seq after the last it saw stored, seq 0 of a later epoch, or
        for a producer it has not seen, its first request (seq 0). Requests that overtook
        their predecessors here have waited for them (`enter`), so in one process a pipeline's
        requests are vouched for as they come; any other is worth a read of the producer's
        state before it reserves anything."""
        with self._changed:
            last = self._last.get((path, producer_id))
        if last is None:
            return seq == 0
        if last.epoch != epoch:
            return epoch > last.epoch and seq == 0
        return seq == last.last_seq + 1

    def enter(self, path: str, producer_id: str, epoch: int, seq: int, timeout: float) -> None:
        """Wait on this thread for the request's turn (`_admit`), then count it in flight."""
        arrived = time.monotonic()
        with self._changed:
            while (remaining := self._admit(path, producer_id, epoch, seq, arrived, timeout)) > 0:
                self._changed.wait(remaining)

    async def enter_async(
        self, path: str, producer_id: str, epoch: int, seq: int, timeout: float
    ) -> None:
        """`enter`, waiting on the event loop instead of a thread."""
        key = (path, producer_id)
        loop = asyncio.get_running_loop()
        arrived = time.monotonic()
        while True:
            changed = asyncio.Event()

            def wake(event: asyncio.Event = changed) -> None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(event.set)

            with self._changed:
                remaining = self._admit(path, producer_id, epoch, seq, arrived, timeout)
                if remaining <= 0:
                    return
                self._listeners.setdefault(key, set()).add(wake)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), remaining)
            finally:
                with self._changed:
                    listening = self._listeners.get(key, set())
                    listening.discard(wake)
                    if not listening:
                        self._listeners.pop(key, None)

    def _admit(
        self, path: str, producer_id: str, epoch: int, seq: int, arrived: float, timeout: float
    ) -> float:
        """0 when the request's turn has come (it is then counted in flight), else how long it
        may still wait for it: up to `timeout` after it arrived while a predecessor is in flight
        here, `ARRIVAL_WAIT_SECONDS` while none is. Requests that no pipeline explains (a gap
        past `PIPELINE_DEPTH`, another epoch) go at once, for the store to refuse."""
        key = (path, producer_id)
        last = self._last.get(key)
        predecessor_missing = last is not None and last.epoch == epoch and last.last_seq < seq - 1
        if predecessor_missing and within_pipeline(last, epoch, seq):
            ahead = any(e == epoch and s < seq for e, s in self._in_flight.get(key, ()))
            remaining = arrived + (timeout if ahead else ARRIVAL_WAIT_SECONDS) - time.monotonic()
            if remaining > 0:
                return remaining
        self._in_flight.setdefault(key, []).append((epoch, seq))
        return 0.0

    def leave(
        self, path: str, producer_id: str, epoch: int, seq: int, stored: ProducerState | None
    ) -> None:
        """The request is answered; `stored`: the producer's state it found or left stored."""
        key = (path, producer_id)
        with self._changed:
            flying = self._in_flight.get(key, [])
            if (epoch, seq) in flying:
                flying.remove((epoch, seq))
            if not flying:
                self._in_flight.pop(key, None)
            if stored is not None:
                self.learn(path, producer_id, stored)
            self._changed.notify_all()
            for wake in tuple(self._listeners.get(key, ())):
                wake()

    def learn(self, path: str, producer_id: str, stored: ProducerState) -> None:
        """The producer's state was found stored (it only moves forward)."""
        key = (path, producer_id)
        with self._changed:
            last = self._last.get(key)
            if last is None or (stored.epoch, stored.last_seq) > (last.epoch, last.last_seq):
                self._last[key] = stored
                if len(self._last) > _REMEMBERED:
                    self._last.pop(next(iter(self._last)))
