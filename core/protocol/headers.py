"""Parsing of the protocol's request headers into typed values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from .errors import bad_request

DEFAULT_CONTENT_TYPE = "application/octet-stream"
JSON_MEDIA_TYPE = "application/json"
MAX_SAFE_INTEGER = 2**53 - 1

# At most 16 digits: every value we accept fits well within 2^53, and int() never sees
# an absurdly long string.
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,15}")
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def media_type(content_type: str) -> str:
    """The lower-cased media type without parameters, used to compare content types."""
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    return media_type(content_type) == JSON_MEDIA_TYPE


def is_true(value: str | None) -> bool:
    """Stream-Closed counts only when it is exactly `true`, in any case."""
    return value is not None and value.strip().lower() == "true"


def parse_ttl(value: str | None) -> int | None:
    if value is None:
        return None
    if not _DECIMAL.fullmatch(value.strip()):
        raise bad_request("Stream-TTL must be a non-negative decimal integer")
    return int(value.strip())


def parse_expires_at(value: str | None) -> float | None:
    """An RFC 3339 timestamp with a zone, as seconds since the epoch."""
    if value is None:
        return None
    text = value.strip()
    if not _RFC3339.fullmatch(text):
        raise bad_request("Stream-Expires-At must be an RFC 3339 timestamp")
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z").replace("t", "T"))
    except ValueError as exc:
        raise bad_request("Stream-Expires-At must be an RFC 3339 timestamp") from exc
    return moment.timestamp()


def format_expires_at(seconds: float) -> str:
    """RFC 3339 in UTC with millisecond precision."""
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_counter(name: str, value: str) -> int:
    if not _DECIMAL.fullmatch(value):
        raise bad_request(f"{name} must be a non-negative integer")
    number = int(value)
    if number > MAX_SAFE_INTEGER:
        raise bad_request(f"{name} must be at most 2^53-1")
    return number


def parse_sub_offset(value: str | None) -> int:
    """Stream-Fork-Sub-Offset: a non-negative decimal integer; absent means 0."""
    if value is None:
        return 0
    if not _DECIMAL.fullmatch(value.strip()):
        raise bad_request("Stream-Fork-Sub-Offset must be a non-negative decimal integer")
    return int(value.strip())


@dataclass(frozen=True)
class ProducerClaim:
    """The (id, epoch, seq) a producer sent with one request."""

    producer_id: str
    epoch: int
    seq: int


def parse_producer(
    producer_id: str | None, epoch: str | None, seq: str | None
) -> ProducerClaim | None:
    given = [v is not None for v in (producer_id, epoch, seq)]
    if not any(given):
        return None
    if not all(given):
        raise bad_request("Producer-Id, Producer-Epoch and Producer-Seq must be sent together")
    assert producer_id is not None and epoch is not None and seq is not None
    if producer_id.strip() == "":
        raise bad_request("Producer-Id must not be empty")
    return ProducerClaim(
        producer_id,
        _parse_counter("Producer-Epoch", epoch.strip()),
        _parse_counter("Producer-Seq", seq.strip()),
    )
