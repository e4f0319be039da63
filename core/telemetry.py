"""The figures the server reports: a no-op by default, CloudWatch EMF metrics under Lambda
(`functions/api.py`). docs/operating.md explains each one.

Dimensions are few and low in cardinality (an operation, a status, a cache-key shape): a
stream's name never becomes one, since each distinct value is a metric CloudWatch bills.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Protocol


class Unit(Enum):
    COUNT = "Count"
    BYTES = "Bytes"
    MILLISECONDS = "Milliseconds"
    SECONDS = "Seconds"


class Metric(Enum):
    # Appends and their outcome.
    APPENDS = "Appends"  # committed
    BYTES_APPENDED = "BytesAppended"  # committed bytes
    APPENDS_DEDUPLICATED = "AppendsDeduplicated"  # a producer's retry of a committed append
    BYTES_DEDUPLICATED = "BytesDeduplicated"  # the bytes those retries carried, not written
    APPENDS_REFUSED = "AppendsRefused"  # answered 4xx or 5xx; dimension Status
    CONDITIONAL_WRITE_RETRIES = "ConditionalWriteRetries"  # commit races lost, each retried
    AWS_THROTTLES = "AwsThrottles"
    # Reads.
    READS = "Reads"
    ORIGIN_READS = "OriginReads"  # GETs answered; dimensions Shape and CacheControl
    LONG_POLL_WAITS = "LongPollWaits"
    LONG_POLL_WAKES = "LongPollWakes"  # a wait ended by data or a close
    LONG_POLL_TIMEOUTS = "LongPollTimeouts"  # a wait that ended empty (204)
    LONG_POLLS_ABANDONED = "LongPollsAbandoned"  # the client left while it waited
    # Latency, from the request's arrival to its response's start, by operation.
    APPEND_LATENCY = "AppendLatency"
    CATCH_UP_LATENCY = "CatchUpLatency"
    LONG_POLL_LATENCY = "LongPollLatency"
    SSE_LATENCY = "SseLatency"  # to the first event
    CREATE_LATENCY = "CreateLatency"
    DELETE_LATENCY = "DeleteLatency"
    HEAD_LATENCY = "HeadLatency"
    # The sealer's runs (`functions/sealer.py`).
    SEAL_MARKS_FOUND = "SealMarksFound"
    OLDEST_SEAL_MARK_AGE = "OldestSealMarkAge"  # seconds the oldest of them had waited
    STREAMS_SEALED = "StreamsSealed"
    SEGMENTS_WRITTEN = "SegmentsWritten"
    BYTES_SEALED = "BytesSealed"
    SEAL_RACES_LOST = "SealRacesLost"
    SEAL_FAILURES = "SealFailures"  # streams left marked for the next run after an error
    # Retention runs (`functions/sealer.py`, {"job": "retention"}).
    RETENTION_CUTS = "RetentionCuts"  # cuts announced (retention or compaction)
    BYTES_DROPPED = "BytesDropped"  # history below the retention cuts announced
    STREAMS_COMPACTED = "StreamsCompacted"
    BYTES_COMPACTED = "BytesCompacted"  # history folded into the snapshots announced
    SNAPSHOT_BYTES = "SnapshotBytes"  # ... and what those snapshots weigh
    COMPACTIONS_REFUSED = "CompactionsRefused"  # histories that are not State Protocol
    RETENTION_FAILURES = "RetentionFailures"  # streams left for the next run after an error
    # The collector's runs (`functions/gc.py`).
    STREAMS_REAPED = "StreamsReaped"
    INCARNATIONS_COLLECTED = "IncarnationsCollected"
    ITEMS_COLLECTED = "ItemsCollected"
    OBJECTS_COLLECTED = "ObjectsCollected"
    ORPHANS_COLLECTED = "OrphansCollected"
    OBJECTS_NOT_COLLECTED = "ObjectsNotCollected"  # S3 refused to delete them; retried next run
    # Subscriptions (`functions/subscriptions.py`, and `dsaws serve`'s in-process worker).
    WEBHOOK_DELIVERIES = "WebhookDeliveries"  # wakes a webhook accepted
    WEBHOOK_FAILURES = "WebhookFailures"  # POSTs that failed (refused, timed out, unreachable)
    WEBHOOK_RETRIES = "WebhookRetries"  # failed deliveries scheduled again after a backoff
    PENDING_WAKES = "PendingWakes"  # wakes issued and not yet acked or released, at a sweep
    OLDEST_PENDING_WAKE_AGE = "OldestPendingWakeAge"  # seconds, at a sweep


UNITS: Mapping[Metric, Unit] = {
    Metric.BYTES_APPENDED: Unit.BYTES,
    Metric.BYTES_SEALED: Unit.BYTES,
    Metric.BYTES_DROPPED: Unit.BYTES,
    Metric.BYTES_COMPACTED: Unit.BYTES,
    Metric.SNAPSHOT_BYTES: Unit.BYTES,
    Metric.BYTES_DEDUPLICATED: Unit.BYTES,
    Metric.OLDEST_PENDING_WAKE_AGE: Unit.SECONDS,
    Metric.OLDEST_SEAL_MARK_AGE: Unit.SECONDS,
    **{metric: Unit.MILLISECONDS for metric in Metric if metric.value.endswith("Latency")},
}


def unit_of(metric: Metric) -> Unit:
    return UNITS.get(metric, Unit.COUNT)


class Telemetry(Protocol):
    def count(self, metric: Metric, value: float = 1) -> None:
        """Record `value` (a count, bytes, or milliseconds: `unit_of(metric)`)."""
        ...

    def count_by(self, metric: Metric, dimensions: Mapping[str, str], value: float = 1) -> None:
        """Record `value` under `dimensions` (few values each: never a stream's name)."""
        ...


class NoTelemetry:
    def count(self, metric: Metric, value: float = 1) -> None:
        pass

    def count_by(self, metric: Metric, dimensions: Mapping[str, str], value: float = 1) -> None:
        pass
