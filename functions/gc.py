"""The scheduled collector function: removes data of deleted and expired streams."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from durable_streams_aws.core.config import load_settings
from durable_streams_aws.core.runtime import build_backend
from durable_streams_aws.core.storage import CollectionReport, Collector
from durable_streams_aws.core.telemetry import Metric

from ._metrics import PowertoolsTelemetry, metrics

logger = Logger(service="durable-streams-gc")
_backend = build_backend(load_settings())
_telemetry = PowertoolsTelemetry()


def figures(report: CollectionReport) -> dict[Metric, float]:
    return {
        Metric.STREAMS_REAPED: report.streams_reaped,
        Metric.INCARNATIONS_COLLECTED: report.incarnations_removed,
        Metric.ITEMS_COLLECTED: report.items_deleted,
        Metric.OBJECTS_COLLECTED: report.objects_deleted,
        Metric.ORPHANS_COLLECTED: report.orphans_deleted,
        Metric.OBJECTS_NOT_COLLECTED: report.objects_failed,
    }


class CollectionIncomplete(Exception):
    """S3 refused to delete some objects: the run fails, so that the functions' error alarm
    and the dead-letter queue say so (a missing permission would otherwise go unseen)."""


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    report = Collector(_backend.store).run()
    logger.info("collection finished", extra=report.as_dict())
    _telemetry.report(figures(report))
    if report.objects_failed:
        raise CollectionIncomplete(
            f"S3 refused to delete {report.objects_failed} objects (logged above); "
            "what names them stays for the next run"
        )
    return report.as_dict()
