"""Offset tokens: fixed-width, lexicographically ordered, never the sentinels.

A token names a byte position: `<16 zeros>_<position, 16 digits>`. Nearly every token the
server hands out lies between two appends (two messages, for JSON): a tail, or the end of a
response, which takes whole appends. Only a response cut inside an append, because that append
alone is larger than a response may be, ends between two of its bytes; its token carries the
suffix `_i` ("inside"), which sorts after the plain token of the same position and before
any later one, so the order stays that of the positions.

Clients are not meant to build offsets, but some do: the Yjs layer reads on from a snapshot at
the snapshot's offset plus one. A plain token whose position lies inside an append is read from
that append's start, whole, as the reference server reads it; a token with the suffix is read
from exactly its position.

A compacted stream's snapshot (`core.protocol.compaction`) holds bytes that were never at any
position of the stream, so its token is of its own kind: the position before the one the
snapshot folds the history up to, with the suffix `_s`. It sorts after every token below that
position (`_i` < `_s`) and before the position's own token, where the history after the
snapshot goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from .errors import bad_request, quoted

BEGINNING = "-1"
NOW = "now"
_WIDTH = 16
INSIDE_SUFFIX = "_i"
SNAPSHOT_SUFFIX = "_s"
_PATTERN = re.compile(r"([0-9]{16})_([0-9]{16})(_i|_s)?")
MAX_POSITION = 10**_WIDTH - 1


def format_offset(position: int, inside: bool = False) -> str:
    """The token for a byte position; the first part is reserved and always zero. `inside`:
    the position lies inside an append (a response was cut there)."""
    if not 0 <= position <= MAX_POSITION:
        raise ValueError(f"position out of range: {position}")
    return f"{0:0{_WIDTH}d}_{position:0{_WIDTH}d}{INSIDE_SUFFIX if inside else ''}"


def format_snapshot_offset(position: int) -> str:
    """The token of the snapshot a compaction folded the history below `position` (> 0) into:
    it sorts after every token below `position` and before `position`'s own, and names no
    byte position of the stream (the snapshot's bytes were never at any)."""
    return format_offset(position - 1) + SNAPSHOT_SUFFIX


@dataclass(frozen=True)
class Position:
    """A parsed token: its byte position, and whether it names exactly that position (the
    suffix) or the append holding it, when it lies inside one. `snapshot`: the token of the
    snapshot of the history below `at`."""

    at: int
    exact: bool = False
    snapshot: bool = False


def parse_offset(token: str) -> Position:
    """A token of this server's form; 400 for anything else."""
    match = _PATTERN.fullmatch(token)
    if match is None or match.group(1) != "0" * _WIDTH:
        raise bad_request(f"malformed offset: {quoted(token)}")
    suffix = match.group(3)
    if suffix == SNAPSHOT_SUFFIX:
        if int(match.group(2)) >= MAX_POSITION:
            raise bad_request(f"malformed offset: {quoted(token)}")
        return Position(int(match.group(2)) + 1, snapshot=True)
    return Position(int(match.group(2)), exact=suffix is not None)


def parse_position(token: str) -> int:
    """The byte position of a token of this server's form; 400 for anything else (a
    snapshot's token included: it names no position)."""
    parsed = parse_offset(token)
    if parsed.snapshot:
        raise bad_request(f"a snapshot offset names no position of the stream: {quoted(token)}")
    return parsed.at


class StartKind(Enum):
    BEGINNING = "beginning"
    NOW = "now"
    POSITION = "position"


@dataclass(frozen=True)
class ReadStart:
    kind: StartKind
    position: int = 0
    # A plain token: read from the start of the append `position` lies inside, if it does.
    whole: bool = False
    # The token of a compacted stream's snapshot of the history below `position`.
    snapshot: bool = False

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
    parsed = parse_offset(token)
    if parsed.snapshot:
        return ReadStart(StartKind.POSITION, parsed.at, snapshot=True)
    return ReadStart(StartKind.POSITION, parsed.at, whole=not parsed.exact)


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
