"""Subscriptions (PROTOCOL sections 6 and 7): durable cursors over streams named by a glob
pattern or explicitly, woken by webhook or through a wake stream."""

from .config import config_hash, parse_config, parse_subscription_id
from .errors import SubscriptionError
from .model import (
    Ack,
    Delivery,
    Link,
    LinkStatus,
    LinkType,
    StreamTail,
    Subscription,
    SubscriptionConfig,
    Wake,
)
from .service import Keys, Sent, Subscriptions, stream_report
from .tasks import InProcessScheduler, Scheduler, SqsScheduler, Task, TaskKind

__all__ = [
    "Ack",
    "Delivery",
    "InProcessScheduler",
    "Keys",
    "Link",
    "LinkStatus",
    "LinkType",
    "Scheduler",
    "Sent",
    "SqsScheduler",
    "StreamTail",
    "Subscription",
    "SubscriptionConfig",
    "SubscriptionError",
    "Subscriptions",
    "Task",
    "TaskKind",
    "Wake",
    "config_hash",
    "parse_config",
    "parse_subscription_id",
    "stream_report",
]
