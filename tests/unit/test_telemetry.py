"""The metrics' names and units, as the code and the Lambda functions record them."""

from __future__ import annotations

from durable_streams_aws.core.telemetry import Metric, Unit, unit_of
from durable_streams_aws.functions._metrics import _UNITS


def test_every_unit_a_metric_has_is_one_powertools_knows() -> None:
    assert {unit_of(metric) for metric in Metric} <= set(_UNITS)


def test_latencies_are_milliseconds_and_sizes_bytes() -> None:
    for metric in Metric:
        if metric.value.endswith("Latency"):
            assert unit_of(metric) is Unit.MILLISECONDS, metric
        if metric.value.startswith("Bytes"):
            assert unit_of(metric) is Unit.BYTES, metric
    assert len({metric.value for metric in Metric}) == len(Metric)
