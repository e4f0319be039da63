"""Counters the server reports: a no-op by default, EMF metrics under Lambda."""

from __future__ import annotations

from enum import Enum
from typing import Protocol


class Metric(Enum):
    APPENDS = "Appends"
    BYTES_APPENDED = "BytesAppended"
    READS = "Reads"
    LONG_POLL_WAITS = "LongPollWaits"
    LONG_POLL_WAKES = "LongPollWakes"
    CONDITIONAL_WRITE_RETRIES = "ConditionalWriteRetries"
    AWS_THROTTLES = "AwsThrottles"


class Telemetry(Protocol):
    def count(self, metric: Metric, value: float = 1) -> None: ...


class NoTelemetry:
    def count(self, metric: Metric, value: float = 1) -> None:
        pass
