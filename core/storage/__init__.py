"""The stream store: one interface, one implementation on DynamoDB + S3."""

from .._lazy import lazy_exports
from ._seal_plan import SealPolicy
from .base import Runner, StreamStore
from .dynamo import DynamoStore
from .model import (
    AppendOutcome,
    CreateOutcome,
    CreateSpec,
    CreateStatus,
    ForkRequest,
    InvalidCursor,
    Payload,
    PendingCut,
    Presence,
    ReadBatch,
    Retained,
    Segment,
    Snapshot,
    StoreUnavailable,
    StreamInfo,
    StreamPage,
    bounded_read_budget,
)

# The collector and the sealer run in functions of their own (and `dsaws`): the API function,
# which imports this package on every cold start, never loads them.
_LAZY = {
    "CollectionReport": "gc",
    "Collector": "gc",
    "SealReport": "sealer",
    "Sealer": "sealer",
    "StoreStats": "stats",
    "gather_stats": "stats",
}
__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "AppendOutcome",
    "CollectionReport",
    "Collector",
    "CreateOutcome",
    "CreateSpec",
    "CreateStatus",
    "DynamoStore",
    "ForkRequest",
    "InvalidCursor",
    "Payload",
    "PendingCut",
    "Presence",
    "ReadBatch",
    "Retained",
    "Runner",
    "SealPolicy",
    "SealReport",
    "Sealer",
    "Segment",
    "Snapshot",
    "StoreStats",
    "StoreUnavailable",
    "StreamInfo",
    "StreamPage",
    "StreamStore",
    "bounded_read_budget",
    "gather_stats",
]
