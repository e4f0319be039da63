"""Offset tokens: fixed-width, lexicographically ordered, never the sentinels."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .errors import bad_request, quoted

BEGINNING = "-1"
NOW = "now"
_WIDTH = 16
_PATTERN = re.compile(r"([0-9]{16})_([0-9]{16})")
MAX_POSITION = 10**_WIDTH - 1


def format_offset(position: int) -> str:
    """The token for a byte position; the first part is reserved and always zero."""
    if not 0 <= position <= MAX_POSITION:
        raise ValueError(f"position out of range: {position}")
    return f"{0:0{_WIDTH}d}_{position:0{_WIDTH}d}"


def parse_position(token: str) -> int:
    """The byte position of a token minted by this server; 400 for anything else."""
    match = _PATTERN.fullmatch(token)
    if match is None or match.group(1) != "0" * _WIDTH:
        raise bad_request(f"malformed offset: {quoted(token)}")
    return int(match.group(2))


class StartKind(Enum):
    BEGINNING = "beginning"
    NOW = "now"
    POSITION = "position"


@dataclass(frozen=True)
class ReadStart:
    kind: StartKind
    position: int = 0

    def resolve(self, tail: int) -> int:
        """The byte position to read from, given the stream's current tail."""
        if self.kind is StartKind.NOW:
            return tail
        return self.position


def parse_read_start(values: list[str]) -> ReadStart:
    """Parse the `offset` query values of a read request (absent means the beginning)."""
    if not values:
        return ReadStart(StartKind.BEGINNING)
    if len(values) > 1:
        raise bad_request("offset must be given at most once")
    token = values[0]
    if token == BEGINNING:
        return ReadStart(StartKind.BEGINNING)
    if token == NOW:
        return ReadStart(StartKind.NOW)
    return ReadStart(StartKind.POSITION, parse_position(token))


def parse_read_end(values: list[str], start: ReadStart, live: str | None) -> int | None:
    """Parse `until`, this server's extension that bounds a catch-up read: the read returns
    data before that offset only (so a re-read of a range returns the same bytes whatever was
    appended since). None when absent; 400 when repeated, malformed, given with a live mode
    or with `offset=now`, or before the offset."""
    if not values:
        return None
    if len(values) > 1:
        raise bad_request("until must be given at most once")
    if live is not None:
        raise bad_request("until bounds catch-up reads only, not live ones")
    if start.kind is StartKind.NOW:
        raise bad_request("until cannot bound a read from offset=now")
    end = parse_position(values[0])
    if end < start.position:
        raise bad_request("until is before offset")
    return end
