"""Sealing inside a long-running server (`dsaws serve`): the sealer's sweep on a timer, in a
thread of its own. A deployment runs the same sweep as a scheduled function instead."""

from __future__ import annotations

import logging
import threading

from .sealer import Sealer

logger = logging.getLogger("dsaws.sealer")


class BackgroundSealer:
    def __init__(self, sealer: Sealer, interval: float) -> None:
        self.sealer = sealer
        self.interval = interval
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
                report = self.sealer.run()
            except Exception:  # a failed sweep is retried by the next one
                logger.exception("sealing failed")
                continue
            if report.segments_written:
                logger.info("sealed: %s", report.as_dict())
