"""The stream store: one interface, one implementation on DynamoDB + S3."""

from ._seal_plan import SealPolicy
from .base import StreamStore
from .dynamo import DynamoStore
from .gc import CollectionReport, Collector
from .model import (
    AppendOutcome,
    CreateOutcome,
    CreateSpec,
    CreateStatus,
    ForkRequest,
    InvalidCursor,
    Payload,
    Presence,
    ReadBatch,
    Segment,
    StoreUnavailable,
    StreamInfo,
    StreamPage,
)
from .sealer import Sealer, SealReport

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
    "Presence",
    "ReadBatch",
    "SealPolicy",
    "SealReport",
    "Sealer",
    "Segment",
    "StoreUnavailable",
    "StreamInfo",
    "StreamPage",
    "StreamStore",
]
