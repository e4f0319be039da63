"""Parsing of the protocol's request headers into typed values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from .errors import ProtocolError, bad_request, quoted
from .limits import (
    MAX_CONTENT_TYPE_BYTES,
    MAX_PRODUCER_ID_BYTES,
    MAX_STREAM_SEQ_BYTES,
    MAX_TTL_SECONDS,
    utf8_length,
)

# The protocol's header names, defined once: the server's parsing and responses, the CORS
# lists and the CDN's configuration all use these.
STREAM_NEXT_OFFSET = "Stream-Next-Offset"
STREAM_CLOSED = "Stream-Closed"
STREAM_UP_TO_DATE = "Stream-Up-To-Date"
STREAM_CURSOR = "Stream-Cursor"
STREAM_TTL = "Stream-TTL"
STREAM_EXPIRES_AT = "Stream-Expires-At"
STREAM_SEQ = "Stream-Seq"
PRODUCER_ID = "Producer-Id"
PRODUCER_EPOCH = "Producer-Epoch"
PRODUCER_SEQ = "Producer-Seq"
PRODUCER_EXPECTED_SEQ = "Producer-Expected-Seq"
PRODUCER_RECEIVED_SEQ = "Producer-Received-Seq"
STREAM_SSE_DATA_ENCODING = "Stream-SSE-Data-Encoding"
STREAM_FORKED_FROM = "Stream-Forked-From"
STREAM_FORK_OFFSET = "Stream-Fork-Offset"
STREAM_FORK_SUB_OFFSET = "Stream-Fork-Sub-Offset"
# Extensions of this server: retention policies (`core.protocol.retention`).
STREAM_RETENTION = "Stream-Retention"
STREAM_EARLIEST_OFFSET = "Stream-Earliest-Offset"
# A catch-up read's ask for a JSON stream's array with each message on a line of its own
# (`core.protocol.jsonmode.join_lines`): bulk readers split it without parsing it.
STREAM_JSON_LAYOUT = "Stream-Json-Layout"
JSON_LAYOUT_LINES = "lines"

# Every protocol header a browser may send or read across origins (the CORS lists).
PROTOCOL_HEADERS = (
    STREAM_NEXT_OFFSET,
    STREAM_CLOSED,
    STREAM_UP_TO_DATE,
    STREAM_CURSOR,
    STREAM_TTL,
    STREAM_EXPIRES_AT,
    STREAM_SEQ,
    PRODUCER_ID,
    PRODUCER_EPOCH,
    PRODUCER_SEQ,
    PRODUCER_EXPECTED_SEQ,
    PRODUCER_RECEIVED_SEQ,
    STREAM_FORKED_FROM,
    STREAM_FORK_OFFSET,
    STREAM_FORK_SUB_OFFSET,
    STREAM_SSE_DATA_ENCODING,
    STREAM_RETENTION,
    STREAM_EARLIEST_OFFSET,
    STREAM_JSON_LAYOUT,
)

DEFAULT_CONTENT_TYPE = "application/octet-stream"
JSON_MEDIA_TYPE = "application/json"
MAX_SAFE_INTEGER = 2**53 - 1

# At most 16 digits: every value we accept fits well within 2^53, and int() never sees
# an absurdly long string.
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,15}")
# RFC 9110 media types: type "/" subtype, then parameters (token or quoted-string values).
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED_STRING = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
_MEDIA_TYPE = re.compile(
    rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*(?:{_TOKEN}=(?:{_TOKEN}|{_QUOTED_STRING}))?)*"
)
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def media_type(content_type: str) -> str:
    """The lower-cased media type without parameters, used to compare content types."""
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    return media_type(content_type) == JSON_MEDIA_TYPE


# Types a browser runs script in, or renders as a document that could, when it navigates to
# them: a stream of one of these is served as a download (the CSP sandbox disarms it anyway).
_ACTIVE_MEDIA_TYPES = frozenset(
    {
        "text/html",
        "text/xml",
        "text/xsl",
        "application/xml",
        "application/pdf",
        "text/javascript",
        "text/ecmascript",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/x-shockwave-flash",
        "multipart/x-mixed-replace",
    }
)


def is_active_content(content_type: str) -> bool:
    """Whether a browser navigating to a body of this type may run what it holds: HTML, XML
    of any kind (SVG and XHTML among them), PDF, script."""
    essence = media_type(content_type)
    return essence in _ACTIVE_MEDIA_TYPES or essence.endswith("+xml")


def single_value(name: str, values: list[str]) -> str | None:
    """The one value of a protocol header. A repeated header is refused, and so is a comma in
    its value: a Lambda Function URL joins repeated headers with commas, so that is the only
    way both hosts (uvicorn, which sees the repeats, and Lambda, which sees the join) can give
    the same answer."""
    if not values:
        return None
    if len(values) > 1 or "," in values[0]:
        raise bad_request(f"{name} must be sent once, with a single value (no commas)")
    return values[0]


def parse_content_type(value: str) -> str:
    """A media type as RFC 9110 defines it (type/subtype and parameters), kept as sent."""
    text = value.strip()
    if utf8_length(text) > MAX_CONTENT_TYPE_BYTES or not _MEDIA_TYPE.fullmatch(text):
        raise bad_request(f"Content-Type {quoted(value)} is not a media type (type/subtype)")
    return text


def check_content_encoding(value: str | None) -> None:
    """Bodies are stored as sent, so they must arrive unencoded."""
    if value is not None and value.strip().lower() not in {"", "identity"}:
        raise ProtocolError(
            415, f"Content-Encoding {quoted(value)} is not supported: send the body as is"
        )


def parse_stream_seq(value: str | None) -> str | None:
    if value is None:
        return None
    if value == "" or utf8_length(value) > MAX_STREAM_SEQ_BYTES:
        raise bad_request(f"Stream-Seq must be 1 to {MAX_STREAM_SEQ_BYTES} bytes")
    return value


def check_lifetime(ttl: int | None, expires_at: float | None, now: float) -> None:
    """A new stream's TTL or expiry: one of them at most, at least a second of life, at most
    the documented maximum."""
    if ttl is not None and expires_at is not None:
        raise bad_request("send either Stream-TTL or Stream-Expires-At, not both")
    if ttl is not None and not 1 <= ttl <= MAX_TTL_SECONDS:
        raise bad_request(f"Stream-TTL must be between 1 and {MAX_TTL_SECONDS} seconds")
    if expires_at is not None:
        if expires_at <= now:
            raise bad_request("Stream-Expires-At is in the past")
        if expires_at > now + MAX_TTL_SECONDS:
            raise bad_request(
                f"Stream-Expires-At must be at most {MAX_TTL_SECONDS} seconds from now"
            )


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
    if utf8_length(producer_id) > MAX_PRODUCER_ID_BYTES:
        raise bad_request(f"Producer-Id must be at most {MAX_PRODUCER_ID_BYTES} bytes")
    return ProducerClaim(
        producer_id,
        _parse_counter(PRODUCER_EPOCH, epoch.strip()),
        _parse_counter(PRODUCER_SEQ, seq.strip()),
    )
