"""Sealing inside a long-running server (`dsaws serve`): the sealer's sweep on a timer, in a
thread of its own. A deployment runs the same sweep as a scheduled function instead."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .sealer import Sealer

logger = logging.getLogger("dsaws.sealer")


@dataclass(frozen=True)
class QuietWait:
    """A sweep that waits for the server to be quiet: until it has done no work on a request
    for `seconds` (`idle_for` says how long it has been), but never longer than `longest`."""

    idle_for: Callable[[], float]
    seconds: float = 1.0
    longest: float = 30.0


class BackgroundSealer:
    """`quiet`: each sweep first waits for it. On the embedded emulator a sweep competes with
    the requests for the emulator's one lock and the process's one interpreter; a reader that
    catches up on a stream while it is sealed gets its pages about half as fast."""

    def __init__(self, sealer: Sealer, interval: float, quiet: QuietWait | None = None) -> None:
        self.sealer = sealer
        self.interval = interval
        self.quiet = quiet
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sealer", daemon=True)

    def start(self) -> BackgroundSealer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if not self._wait_until_quiet():
                    return
                report = self.sealer.run()
            except Exception:  # a failed sweep is retried by the next one
                logger.exception("sealing failed")
                continue
            if report.segments_written:
                logger.info("sealed: %s", report.as_dict())

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
