"""Subscriptions (PROTOCOL sections 6 and 7): durable cursors over streams named by a glob
pattern or explicitly, woken by webhook or through a wake stream."""

from .._lazy import lazy_exports
from ._retry import WriteContention
from .config import config_hash, parse_config, parse_subscription_id
from .errors import SubscriptionError
from .model import (
    Ack,
    Completion,
    Delivery,
    Link,
    LinkStatus,
    LinkType,
    StreamTail,
    Subscription,
    SubscriptionConfig,
    Wake,
    WakeFence,
    stream_report,
)
from .ports import Keys, Sent, StreamPort, WebhookPost
from .service import AuthorizedWake, Claim, Creation, Subscriptions
from .tasks import InProcessScheduler, Scheduler, SqsScheduler, Task, TaskKind

# `jwks` needs `cryptography`: loaded on first use, not with the package (as in `wiring`).
__getattr__ = lazy_exports(__name__, {"jwks": "_signing"})

__all__ = [
    "Ack",
    "AuthorizedWake",
    "Claim",
    "Completion",
    "Creation",
    "Delivery",
    "InProcessScheduler",
    "Keys",
    "Link",
    "LinkStatus",
    "LinkType",
    "Scheduler",
    "Sent",
    "SqsScheduler",
    "StreamPort",
    "StreamTail",
    "Subscription",
    "SubscriptionConfig",
    "SubscriptionError",
    "Subscriptions",
    "Task",
    "TaskKind",
    "Wake",
    "WakeFence",
    "WebhookPost",
    "WriteContention",
    "config_hash",
    "jwks",
    "parse_config",
    "parse_subscription_id",
    "stream_report",
]
