"""Pure protocol logic: parsing, decisions, cursors and caching rules. No I/O."""

from .append import AppendDecision, AppendIntent, Verdict, WriteState, decide_append
from .caching import etag, etag_matches, read_cache_control
from .create import StreamConfig
from .cursor import next_cursor
from .errors import ProtocolError, bad_request
from .headers import ProducerClaim, is_json, is_true, media_type
from .jsonmode import join_messages, split_messages
from .offsets import ReadStart, StartKind, format_offset, parse_position, parse_read_start
from .producer import ProducerDecision, ProducerOutcome, ProducerState, decide_producer

__all__ = [
    "AppendDecision",
    "AppendIntent",
    "ProducerClaim",
    "ProducerDecision",
    "ProducerOutcome",
    "ProducerState",
    "ProtocolError",
    "ReadStart",
    "StartKind",
    "StreamConfig",
    "Verdict",
    "WriteState",
    "bad_request",
    "decide_append",
    "decide_producer",
    "etag",
    "etag_matches",
    "format_offset",
    "is_json",
    "is_true",
    "join_messages",
    "media_type",
    "next_cursor",
    "parse_position",
    "parse_read_start",
    "read_cache_control",
    "split_messages",
]
