"""The overview's rates: appends, bytes appended and reads over the last minutes.

`dsaws serve` (and each Lambda instance) counts them in memory as they happen
(`RateRecorder`, a telemetry the stream endpoints report to); a deployment reads the same
figures, summed over every instance, back from CloudWatch (`CloudWatchRates`), where the
functions write them as EMF lines. Neither reads the table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..telemetry import Metric, NoTelemetry, Telemetry

# The series the overview plots, by the name it gives them.
SERIES = {
    "appends": Metric.APPENDS,
    "bytes_appended": Metric.BYTES_APPENDED,
    "reads": Metric.READS,
}
_RECORDED = frozenset(SERIES.values())
STEP_SECONDS = 5
WINDOW_SECONDS = 15 * 60
# CloudWatch keeps EMF metrics at one-minute resolution.
CLOUDWATCH_STEP_SECONDS = 60
# The dimension the functions write every metric with (functions/_metrics.py SERVICE).
SERVICE = "durable-streams"


@dataclass(frozen=True)
class Rates:
    source: str  # what counted them, for the page to say
    step_seconds: int
    window_seconds: int
    series: Mapping[str, list[tuple[int, float]]]  # name -> [(step start, sum in the step)]
    now: float  # when they were read: the last step may be the one in progress

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "now": round(self.now, 3),
            "step_seconds": self.step_seconds,
            "window_seconds": self.window_seconds,
            "series": {
                name: [list(point) for point in points] for name, points in self.series.items()
            },
        }


class RateSource(Protocol):
    # How long an answer may be reused: the console asks once per look of every open tab.
    cache_seconds: float

    def rates(self) -> Rates: ...


class RateRecorder:
    """Counts of the overview's metrics in steps of `step` seconds over the last `window`
    seconds, in memory: a ring of steps, each reset as the clock comes round to it again."""

    cache_seconds = 0.0  # reading it costs nothing

    def __init__(
        self,
        step: int = STEP_SECONDS,
        window: int = WINDOW_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.step = step
        self.window = window
        self.clock = clock
        self._slots = window // step
        self._starts = [-1] * self._slots
        self._sums: list[dict[Metric, float]] = [{} for _ in range(self._slots)]
        self._lock = threading.Lock()

    def record(self, metric: Metric, value: float) -> None:
        if metric not in _RECORDED:
            return
        start = int(self.clock()) // self.step * self.step
        index = start // self.step % self._slots
        with self._lock:
            if self._starts[index] != start:
                self._starts[index] = start
                self._sums[index] = {}
            sums = self._sums[index]
            sums[metric] = sums.get(metric, 0.0) + value

    def rates(self) -> Rates:
        moment = self.clock()
        now = int(moment) // self.step * self.step
        first = now - (self._slots - 1) * self.step
        series: dict[str, list[tuple[int, float]]] = {name: [] for name in SERIES}
        with self._lock:
            for start in range(first, now + 1, self.step):
                index = start // self.step % self._slots
                sums = self._sums[index] if self._starts[index] == start else {}
                for name, metric in SERIES.items():
                    series[name].append((start, sums.get(metric, 0.0)))
        return Rates("this server, since it started", self.step, self.window, series, moment)


class RecordingTelemetry:
    """Telemetry that also feeds a `RateRecorder`."""

    def __init__(self, recorder: RateRecorder, inner: Telemetry | None) -> None:
        self.recorder = recorder
        self.inner: Telemetry = inner if inner is not None else NoTelemetry()

    def count(self, metric: Metric, value: float = 1) -> None:
        self.recorder.record(metric, value)
        self.inner.count(metric, value)

    def count_by(self, metric: Metric, dimensions: Mapping[str, str], value: float = 1) -> None:
        self.inner.count_by(metric, dimensions, value)


class CloudWatchRates:
    """The same series from CloudWatch: every instance's figures, one GetMetricData call. The
    minute in progress is left out: CloudWatch has not gathered it yet."""

    cache_seconds = 30.0

    def __init__(
        self,
        cloudwatch: Any,
        namespace: str,
        window: int = WINDOW_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cloudwatch = cloudwatch
        self.namespace = namespace
        self.window = window
        self.clock = clock

    def rates(self) -> Rates:
        step = CLOUDWATCH_STEP_SECONDS
        moment = self.clock()
        end = int(moment) // step * step
        start = end - self.window
        queries = [
            {
                "Id": name,
                "MetricStat": {
                    "Metric": {
                        "Namespace": self.namespace,
                        "MetricName": metric.value,
                        "Dimensions": [{"Name": "service", "Value": SERVICE}],
                    },
                    "Period": step,
                    "Stat": "Sum",
                },
            }
            for name, metric in SERIES.items()
        ]
        found: dict[str, dict[int, float]] = {name: {} for name in SERIES}
        request: dict[str, Any] = {
            "MetricDataQueries": queries,
            "StartTime": start,
            "EndTime": end,
        }
        while True:
            response = self.cloudwatch.get_metric_data(**request)
            for result in response.get("MetricDataResults", []):
                points = found.get(result["Id"])
                if points is None:
                    continue
                for moment, value in zip(result["Timestamps"], result["Values"], strict=False):
                    points[int(moment.timestamp())] = float(value)
            token = response.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
        series = {
            name: [(at, points.get(at, 0.0)) for at in range(start, end, step)]
            for name, points in found.items()
        }
        # Every step shown is complete: `now` is where the last one ends.
        return Rates("CloudWatch, every instance", step, self.window, series, float(end))
