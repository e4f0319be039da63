"""Stream paths: what may name a stream."""

from __future__ import annotations

from .errors import bad_request
from .limits import MAX_PATH_BYTES, utf8_length

# The protocol reserves this first path segment for its control APIs (subscriptions, JWKS).
RESERVED_SEGMENT = "__ds"
# What a percent-encoded sequence that is not UTF-8 decodes to: refused, so that two different
# raw paths never name the same stream.
_REPLACEMENT_CHARACTER = "\ufffd"


def parse_stream_path(path: str) -> str:
    """The stream path (percent-decoded, relative to the stream root), or a 400 saying why it
    cannot name a stream."""
    if not path or utf8_length(path) > MAX_PATH_BYTES:
        raise bad_request(f"stream path must be 1 to {MAX_PATH_BYTES} bytes in UTF-8")
    _check_characters(path)
    segments = path.split("/")
    if any(segment in {".", ".."} for segment in segments):
        raise bad_request("stream path must not contain '.' or '..' segments")
    if segments[0] == RESERVED_SEGMENT:
        raise bad_request(
            f"paths under {RESERVED_SEGMENT}/ are reserved for Durable Streams control APIs"
        )
    return path


def parse_path_prefix(prefix: str) -> str:
    """A prefix of stream paths to list (empty: every stream), or a 400 saying why no stream
    path could start with it."""
    if utf8_length(prefix) > MAX_PATH_BYTES:
        raise bad_request(f"prefix must be at most {MAX_PATH_BYTES} bytes in UTF-8")
    _check_characters(prefix)
    return prefix


def _check_characters(path: str) -> None:
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in path):
        raise bad_request("path must not contain control characters")
    if _REPLACEMENT_CHARACTER in path or any(0xD800 <= ord(c) <= 0xDFFF for c in path):
        raise bad_request("path must be valid UTF-8 once percent-decoded")
