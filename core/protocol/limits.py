"""Limits on what a request may carry.

They are chosen so that every key the store builds fits DynamoDB's key limits (a partition key
of at most 2048 bytes, a sort key of at most 1024 bytes, both counted in UTF-8) with room to
spare, and so that every value kept in a stream's metadata item stays small. The store checks
its keys against the same numbers (`core.storage._items`), so a limit changed here without the
other fails loudly in the unit tests, never as a 500 in production.
"""

from __future__ import annotations

DYNAMODB_PARTITION_KEY_BYTES = 2048
DYNAMODB_SORT_KEY_BYTES = 1024

MAX_PATH_BYTES = 1024  # the stream item's partition key is "s#" + path
MAX_PRODUCER_ID_BYTES = 256  # a producer item's sort key is "p#" + producer id
MAX_STREAM_SEQ_BYTES = 256  # kept in the stream item and compared on every append
MAX_CONTENT_TYPE_BYTES = 256  # kept in the stream item and sent with every read

# How long a stream may be asked to live: a TTL, or an Expires-At this far ahead.
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600  # ten years


def utf8_length(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def append_too_large(limit: int) -> str:
    """What a client is told when a request body passes the append limit: the limit, and how
    to write more (each append is one request, which the front door bounds)."""
    return (
        f"the request body is larger than the append limit of {limit} bytes: write larger "
        "data as several appends (an idempotent producer keeps them in order, exactly once)"
    )
