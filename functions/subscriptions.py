"""The subscription delivery function: runs the tasks the API queues in SQS (notices of
appends, webhook deliveries and their retries, lease expiries, checks) and, on a schedule,
the sweep: expired leases and due retries whose task was lost, and idle subscriptions with
pending work.

Tasks that fail are reported back, and SQS delivers those messages again: every task is
idempotent (each decision is a write conditioned on the subscription's version)."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools import Logger

from durable_streams_aws.core.config import load_settings
from durable_streams_aws.core.runtime import build_backend
from durable_streams_aws.core.subscriptions import Task
from durable_streams_aws.core.subscriptions.wiring import ConfiguredSubscriptions

from ._metrics import PowertoolsTelemetry, metrics

logger = Logger(service="durable-streams-subscriptions")
_settings = load_settings()
_service = ConfiguredSubscriptions(
    _settings.subscription_settings,
    build_backend(_settings).store,
    telemetry=PowertoolsTelemetry(),
)


def tasks_of(event: dict[str, Any]) -> list[tuple[str, Task]]:
    """The tasks of an SQS batch, with their message ids; a body that is not a task is logged
    and dropped (sending it again would never make it one)."""
    tasks = []
    for record in event.get("Records", []):
        try:
            tasks.append((str(record.get("messageId", "")), Task.from_json(record["body"])))
        except (KeyError, TypeError, ValueError, json.JSONDecodeError):
            logger.warning("dropped a message that is not a task", extra={"record": record})
    return tasks


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if isinstance(event, dict) and "Records" in event:
        batch = tasks_of(event)
        failed = set(_service.run([task for _, task in batch]))
        # Reported per message (ReportBatchItemFailures): SQS delivers only these again.
        failures = [{"itemIdentifier": mid} for mid, task in batch if task in failed]
        return {"batchItemFailures": failures}
    _service.sweep()
    return {"swept": 1}
