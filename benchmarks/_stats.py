"""Summaries of measured figures, the same for every benchmark: percentiles by one rule, and
the wall and CPU time of a measured block."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable


def percentile(values: Iterable[float], fraction: float) -> float:
    """Nearest rank: the smallest value with at least `fraction` (0 to 1) of the values at or
    below it; NaN for no values (a benchmark prints that rather than failing)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def percentile_ms(seconds: Iterable[float], fraction: float) -> float:
    """`percentile` of durations given in seconds, in milliseconds."""
    return 1000 * percentile(seconds, fraction)


class Timed:
    """Wall time and this process's CPU time over a block. The client's CPU share says who set
    the pace: near 100%, the Python client did, and the server could have gone faster."""

    def __enter__(self) -> Timed:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._wall
        self.client_cpu = (time.process_time() - self._cpu) / self.seconds
