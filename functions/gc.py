"""The scheduled collector function: removes data of deleted and expired streams."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger

from durable_streams_aws.core.config import load_settings
from durable_streams_aws.core.runtime import build_backend
from durable_streams_aws.core.storage import Collector

logger = Logger(service="durable-streams-gc")
_backend = build_backend(load_settings())


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    report = Collector(_backend.store).run().as_dict()
    logger.info("collection finished", extra=report)
    return report
