"""Background sweeps that take turns with the requests, on the embedded emulator.

Inside `dsaws serve` the sealer and the collector run in threads of their own, and every call
they make goes to the emulator in the same process: they share its one lock and the
interpreter's one lock (the GIL) with the event loop that serves requests. Left to
themselves, they made a sequential writer's appends wait: for the emulator's lock behind a
sweep's call, and for the interpreter, which a busy thread hands over only every 5 ms (the
switch interval) and takes back each time the event loop waits on a socket, several times per
request. Sweeps ran for seconds at a time, and appends during one took 2 to 4 times their
usual time at the median, 15 to 35 times at p99 (see benchmarks/README.md, "Append latency
spikes").

`Lockstep` makes a sweep's thread and the event loop take turns, as one thread would: before
each of its calls to the emulator (`before_turn`), the sweep's thread asks the event loop for a
turn and waits; the event loop grants it once no request is being worked on (or after
`longest` seconds of waiting, so that sweeps progress under any load), and then waits itself
while the sweep takes its step (up to its next call), at most `step_wait` seconds. So the two
never compete for either lock: a request that arrives during a step waits for the rest of that
one step, which the sweeps keep short (a page of items, one delete). A step longer than
`step_wait` (writing a segment to S3, a journal compaction's disk write) goes on beside the
requests, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol


class Activity(Protocol):
    """The requests, as seen from the event loop (`core.http.middleware.RequestActivity`)."""

    loop: asyncio.AbstractEventLoop | None
    on_idle: Callable[[], None] | None

    @property
    def last_worked(self) -> float: ...
    def working(self, patience: float) -> bool: ...


class Lockstep:
    def __init__(
        self,
        activity: Activity,
        patience: float = 0.05,
        longest: float = 0.02,
        step_wait: float = 0.01,
        give_up: float = 1.0,
    ) -> None:
        """`patience`: a request in flight that has done nothing for this long only waits (a
        long-poll), and does not hold the sweeps back. `give_up`: how long a sweep's thread
        waits for an event loop that does not answer (one that is stopping) before going on."""
        self.activity = activity
        self.patience = patience
        self.longest = longest
        self.step_wait = step_wait
        self.give_up = give_up
        activity.on_idle = self._idle
        self._threads: set[int] = set()
        self._go = threading.Event()  # the event loop granted the turn asked for
        self._done = threading.Event()  # the step granted last is over
        self._done.set()
        self._asked_at: float | None = None  # on the event loop: a turn is wanted since then
        self._timer: asyncio.TimerHandle | None = None
        # Counts, for tests and traces: turns granted, and those the event loop kept waiting
        # for a request.
        self.turns = 0
        self.deferred = 0

    def enrol(self) -> None:
        """Take turns with the requests from now on, in the calling thread (a sweep's)."""
        self._threads.add(threading.get_ident())

    # ------------------------------------------------------------ the sweep's thread

    def before_turn(self) -> None:
        """Called before every call to the emulator, in whatever thread makes it: a sweep's
        thread waits here for its turn; any other thread goes on at once."""
        if threading.get_ident() not in self._threads:
            return
        loop = self.activity.loop
        if loop is None:  # no request has come yet: nothing to keep out of the way of
            return
        self._done.set()  # the step that led here is over
        self._go.clear()
        try:
            loop.call_soon_threadsafe(self._asked)
        except RuntimeError:  # the event loop is closed: the server is stopping
            return
        self._go.wait(self.give_up)

    @contextlib.contextmanager
    def sweep(self) -> Iterator[None]:
        """Around a whole sweep: its last step ends with it."""
        try:
            yield
        finally:
            self._done.set()

    # ------------------------------------------------------------ the event loop

    def _asked(self) -> None:
        if self._asked_at is None:
            self._asked_at = time.monotonic()
        # Not at once: a request that arrived meanwhile is read on the loop's next turn, and
        # comes first.
        loop = self.activity.loop
        assert loop is not None
        loop.call_soon(self._consider)

    def _idle(self) -> None:
        if self._asked_at is not None and self.activity.loop is not None:
            self.activity.loop.call_soon(self._consider)

    def _consider(self, seen: float | None = None) -> None:
        """Grant the turn asked for once the requests let it. `seen`: when the server last
        worked on a request, as a first look found it with none being worked on."""
        if self._asked_at is None:
            return
        waited = time.monotonic() - self._asked_at
        loop = self.activity.loop
        assert loop is not None
        if waited >= self.longest:
            self._grant()
            return
        if self.activity.working(self.patience):
            if self._timer is None:
                self.deferred += 1
                self._timer = loop.call_later(self.longest - waited, self._expired)
            return
        last = self.activity.last_worked
        if seen != last:
            # Look again in the loop's next turn, and grant only if nothing happened between
            # the two looks: a request read in this turn is worked on from the next one, and
            # the response of one that ended in this turn leaves at its end (uvloop writes
            # after the turn's callbacks): a step granted now would hold either back.
            loop.call_soon(self._consider, last)
            return
        self._grant()

    def _expired(self) -> None:
        self._timer = None
        self._consider()

    def _grant(self) -> None:
        self._asked_at = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.turns += 1
        self._done.clear()
        self._go.set()
        # The event loop stands still while the step runs (up to `step_wait`): the two never
        # run at once, so neither waits for the interpreter or the emulator's lock.
        self._done.wait(self.step_wait)
