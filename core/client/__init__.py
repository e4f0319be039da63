"""A Python client for Durable Streams servers (this one or any other)."""

from ._async import AsyncDurableStream
from ._errors import (
    AccessDenied,
    BadRequest,
    DurableStreamError,
    OffsetGone,
    OutcomeUnknown,
    SequenceConflict,
    StreamClosed,
    StreamConflict,
    StreamGone,
    StreamNotFound,
    Unavailable,
    UntilNotSupported,
)
from ._listing import list_streams
from ._offset import Offset
from ._producer import (
    IdempotentProducer,
    ProducerError,
    ProducerSettings,
    SyncIdempotentProducer,
)
from ._retry import RetryPolicy
from ._sync import DurableStream
from ._wire import Batch, Live, StreamInfo

__all__ = [
    "AccessDenied",
    "AsyncDurableStream",
    "BadRequest",
    "Batch",
    "DurableStream",
    "DurableStreamError",
    "IdempotentProducer",
    "Live",
    "Offset",
    "OffsetGone",
    "OutcomeUnknown",
    "ProducerError",
    "ProducerSettings",
    "RetryPolicy",
    "SequenceConflict",
    "StreamClosed",
    "StreamConflict",
    "StreamGone",
    "StreamInfo",
    "StreamNotFound",
    "SyncIdempotentProducer",
    "Unavailable",
    "UntilNotSupported",
    "list_streams",
]
