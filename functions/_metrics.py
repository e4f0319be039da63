"""The functions' metrics: CloudWatch EMF lines through Powertools, in one namespace, each
with the `service` dimension the dashboard and the alarms name (docs/operating.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit, single_metric

from durable_streams_aws.core.telemetry import Metric, Unit, unit_of

NAMESPACE = "DurableStreams"
SERVICE = "durable-streams"

metrics = Metrics(namespace=NAMESPACE, service=SERVICE)

_UNITS = {
    Unit.COUNT: MetricUnit.Count,
    Unit.BYTES: MetricUnit.Bytes,
    Unit.MILLISECONDS: MetricUnit.Milliseconds,
    Unit.SECONDS: MetricUnit.Seconds,
}


class PowertoolsTelemetry:
    """Figures gathered over an invocation and written as one EMF line when it ends
    (`metrics.log_metrics`); figures with dimensions of their own are a line each."""

    def __init__(self) -> None:
        self._silent = False
        # Powertools' buffer is a dict of lists, and subscription delivery posts webhooks
        # from several threads at once.
        self._lock = threading.Lock()

    @contextmanager
    def silenced(self) -> Iterator[None]:
        """Record nothing meanwhile (the init's warm-up requests are not traffic)."""
        self._silent = True
        try:
            yield
        finally:
            self._silent = False

    def count(self, metric: Metric, value: float = 1) -> None:
        if self._silent:
            return
        with self._lock:
            metrics.add_metric(name=metric.value, unit=_UNITS[unit_of(metric)], value=value)

    def count_by(self, metric: Metric, dimensions: Mapping[str, str], value: float = 1) -> None:
        if self._silent:
            return
        with single_metric(
            name=metric.value,
            unit=_UNITS[unit_of(metric)],
            value=value,
            namespace=NAMESPACE,
            default_dimensions={"service": SERVICE, **dimensions},
        ):
            pass

    def report(self, figures: Mapping[Metric, float]) -> None:
        """A background run's report: each figure, zeros included (an alarm on a run's work
        needs a data point for every run, not only for the runs that did something)."""
        for metric, value in figures.items():
            self.count(metric, value)
