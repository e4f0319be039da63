"""The scheduled sealer function: moves stream history out of DynamoDB into S3 segments, and
applies the streams' retention policies.

The schedule's event seals the streams that commits marked; `{"path": "..."}` seals one
stream and `{"all": true}` every stream (a whole-table scan, for operators). The retention
schedule's event, `{"job": "retention"}`, runs retention and compaction over the streams that
have a policy (`core.storage.retention`)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from durable_streams_aws.core.config import load_settings
from durable_streams_aws.core.runtime import build_backend, retention_run, seal_policy
from durable_streams_aws.core.storage import Sealer, SealReport
from durable_streams_aws.core.storage.retention import RetentionReport
from durable_streams_aws.core.telemetry import Metric

from ._metrics import PowertoolsTelemetry, metrics

logger = Logger(service="durable-streams-sealer")
_settings = load_settings()
_store = build_backend(_settings).store
_sealer = Sealer(_store, seal_policy(_settings))
_retention = retention_run(_store, _settings)
_telemetry = PowertoolsTelemetry()


def figures(report: SealReport) -> dict[Metric, float]:
    return {
        Metric.SEAL_MARKS_FOUND: report.marks_found,
        Metric.OLDEST_SEAL_MARK_AGE: report.oldest_mark_seconds,
        Metric.STREAMS_SEALED: report.streams_sealed,
        Metric.SEGMENTS_WRITTEN: report.segments_written,
        Metric.BYTES_SEALED: report.bytes_sealed,
        Metric.SEAL_RACES_LOST: report.races_lost,
        Metric.SEAL_FAILURES: report.streams_failed,
    }


def retention_figures(report: RetentionReport) -> dict[Metric, float]:
    return {
        Metric.RETENTION_CUTS: report.cuts_announced,
        Metric.BYTES_DROPPED: report.bytes_dropped,
        Metric.STREAMS_COMPACTED: report.streams_compacted,
        Metric.BYTES_COMPACTED: report.bytes_compacted,
        Metric.SNAPSHOT_BYTES: report.snapshot_bytes,
        Metric.COMPACTIONS_REFUSED: report.compactions_refused,
        Metric.RETENTION_FAILURES: report.streams_failed,
    }


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    if isinstance(event, dict) and event.get("job") == "retention":
        retained = _retention.run()
        logger.info("retention finished", extra=retained.as_dict())
        _telemetry.report(retention_figures(retained))
        return retained.as_dict()
    path = event.get("path") if isinstance(event, dict) else None
    if isinstance(path, str):
        report = _sealer.seal(path)
    elif isinstance(event, dict) and event.get("all") is True:
        report = _sealer.run_all()
    else:
        report = _sealer.run()
    logger.info("sealing finished", extra=report.as_dict())
    _telemetry.report(figures(report))
    return report.as_dict()
