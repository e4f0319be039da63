"""Background work inside a long-running server (`dsaws serve`): the sealer's sweep and the
collector's, each on a timer in a thread of its own. A deployment runs the same sweeps as
scheduled functions instead."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .gc import Collector
from .lockstep import Lockstep
from .sealer import Sealer

logger = logging.getLogger("dsaws.background")


class Report(Protocol):
    def as_dict(self) -> dict[str, int]: ...


@dataclass(frozen=True)
class SweepRun:
    """One sweep, for a listener that explains pauses (`dsaws serve` with `DS_PAUSE_TRACE`):
    when its interval ended, when it began (after the quiet wait, if any), when it and the
    work after it ended (`time.monotonic()`), and the CPU time its thread spent meanwhile."""

    name: str
    due: float
    started: float
    swept: float
    ended: float
    thread_cpu: float
    report: dict[str, int]


@dataclass(frozen=True)
class QuietWait:
    """A sweep that waits for the server to be quiet: until it has done no work on a request
    for `seconds` (`idle_for` says how long it has been), but never longer than `longest`."""

    idle_for: Callable[[], float]
    seconds: float = 1.0
    longest: float = 30.0


class BackgroundSweep:
    """`sweep` every `interval` seconds, after waiting for `quiet` when given. On the embedded
    emulator a sweep competes with the requests for the emulator's one lock and the process's
    one interpreter; a reader that catches up on a stream while it is sealed gets its pages
    about half as fast. With `lockstep`, the sweep (and `after`) take turns with the requests
    instead (`core.storage.lockstep`). `after` runs once a sweep that did something has
    finished."""

    def __init__(
        self,
        name: str,
        sweep: Callable[[], Report],
        interval: float,
        quiet: QuietWait | None = None,
        after: Callable[[], None] | None = None,
        did_work: Callable[[Report], bool] = lambda report: any(report.as_dict().values()),
        listener: Callable[[SweepRun], None] | None = None,
        lockstep: Lockstep | None = None,
    ) -> None:
        self.name = name
        self.listener = listener
        self.lockstep = lockstep
        self.did_work = did_work
        self.sweep = sweep
        self.interval = interval
        self.quiet = quiet
        self.after = after
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> BackgroundSweep:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        if self.lockstep is not None:
            self.lockstep.enrol()
        while not self._stop.wait(self.interval):
            try:
                due = time.monotonic()
                if not self._wait_until_quiet():
                    return
                started, cpu = time.monotonic(), time.thread_time()
                with self.lockstep.sweep() if self.lockstep else contextlib.nullcontext():
                    report = self.sweep()
                    swept = time.monotonic()
                    if self.did_work(report):
                        logger.info("%s: %s", self.name, report.as_dict())
                        if self.after is not None:
                            self.after()
                if self.listener is not None:
                    cpu = time.thread_time() - cpu
                    ended = time.monotonic()
                    run = SweepRun(self.name, due, started, swept, ended, cpu, report.as_dict())
                    self.listener(run)
            except Exception:  # a failed sweep is retried by the next one
                logger.exception("%s failed", self.name)

    def _wait_until_quiet(self) -> bool:
        """False when stopped meanwhile."""
        if self.quiet is None:
            return True
        deadline = time.monotonic() + self.quiet.longest
        while (idle := self.quiet.idle_for()) < self.quiet.seconds:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if self._stop.wait(min(self.quiet.seconds - idle, left)):
                return False
        return True


class BackgroundSealer(BackgroundSweep):
    """The sealer's sweep. `after`: what to do once segments were written (the chunks they
    replaced are history in the embedded emulator's journal)."""

    def __init__(
        self,
        sealer: Sealer,
        interval: float,
        quiet: QuietWait | None = None,
        after: Callable[[], None] | None = None,
        listener: Callable[[SweepRun], None] | None = None,
        lockstep: Lockstep | None = None,
    ) -> None:
        def sealed(report: Report) -> bool:
            return bool(report.as_dict().get("segments_written"))

        super().__init__(
            "sealing",
            sealer.run,
            interval,
            quiet,
            after,
            did_work=sealed,
            listener=listener,
            lockstep=lockstep,
        )
        self.sealer = sealer


class BackgroundCollector(BackgroundSweep):
    """The collector's sweep: deleted and expired streams' data, and orphaned uploads, go
    after the same grace as in a deployment. `after`: what to do once something was removed
    (the embedded emulator compacts its journal when that is now mostly history)."""

    def __init__(
        self,
        collector: Collector,
        interval: float,
        quiet: QuietWait | None = None,
        after: Callable[[], None] | None = None,
        listener: Callable[[SweepRun], None] | None = None,
        lockstep: Lockstep | None = None,
    ) -> None:
        super().__init__(
            "collecting",
            collector.run,
            interval,
            quiet,
            after,
            listener=listener,
            lockstep=lockstep,
        )
        self.collector = collector
