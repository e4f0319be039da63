"""Subscription patterns: globs over stream-root-relative stream paths.

A pattern is split on '/' into segments. `**` matches zero or more whole segments, `*` matches
exactly one, and any other segment is literal except that `*` inside it matches any run of
characters within that one segment (`sync-*` matches `sync-123`). No other character is
special, so a stream name with `?` or `[` needs no escaping.
"""

from __future__ import annotations

from functools import lru_cache

from durable_streams_aws.core.protocol.errors import quoted
from durable_streams_aws.core.protocol.limits import MAX_PATH_BYTES

from .errors import invalid

_ANY_SEGMENTS = "**"

# A compiled segment: None for `**`, otherwise the literal pieces between its `*`s (one piece
# for a segment without any `*`).
_Segment = tuple[str, ...] | None


def check_pattern(pattern: str) -> str:
    """The pattern, or an INVALID_REQUEST saying why it is not one."""
    if not isinstance(pattern, str) or not pattern:
        raise invalid("pattern must be a non-empty string")
    try:
        size = len(pattern.encode("utf-8"))
    except UnicodeEncodeError:
        # Lone surrogates: no stream path can contain them, and they cannot be stored.
        raise invalid("pattern must be valid Unicode") from None
    if size > MAX_PATH_BYTES:
        raise invalid(f"pattern must be at most {MAX_PATH_BYTES} bytes in UTF-8")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in pattern):
        raise invalid("pattern must not contain control characters")
    if pattern.startswith("/"):
        raise invalid("pattern is relative to the stream root and must not start with '/'")
    for segment in pattern.split("/"):
        if not segment:
            raise invalid("pattern must not contain empty segments")
        if segment in {".", ".."}:
            raise invalid("pattern must not contain '.' or '..' segments")
        if _ANY_SEGMENTS in segment and segment != _ANY_SEGMENTS:
            raise invalid(
                f"'**' must be a whole segment, not part of {quoted(segment)}; "
                "use '*' for a wildcard within a segment"
            )
    return pattern


def glob_matches(pattern: str, path: str) -> bool:
    """Whether the stream path matches the (checked) pattern."""
    segments = _compile(pattern)
    final = len(segments)
    # Every pattern position the path so far can have reached, advanced one path segment at a
    # time: the recursive match memoised, so the work stays within pattern segments x path
    # segments however many `**`s there are, where backtracking is exponential in them.
    reached = _skip_any_segments(segments, {0})
    for part in path.split("/"):
        advanced: set[int] = set()
        for position in reached:
            if position == final:
                continue
            segment = segments[position]
            if segment is None:
                advanced.add(position)  # `**` consumes this segment and may consume more
            elif _segment_matches(segment, part):
                advanced.add(position + 1)
        if not advanced:
            return False
        reached = _skip_any_segments(segments, advanced)
    return final in reached


def literal_prefix(pattern: str) -> str:
    """A prefix of every stream path the pattern matches, as long as whole literal segments
    allow: what to list when backfilling existing streams.

    `events/*` gives `events/`. A fully literal pattern gives itself; `a/**` gives `a` (no
    slash), because `**` may match zero segments and so `a/**` matches the stream `a`.
    """
    segments = pattern.split("/")
    literals: list[str] = []
    for segment in segments:
        if "*" in segment:
            break
        literals.append(segment)
    if not literals:
        return ""
    rest = segments[len(literals) :]
    needs_another_segment = any(segment != _ANY_SEGMENTS for segment in rest)
    return "/".join(literals) + ("/" if needs_another_segment else "")


# Every append checks every subscription's pattern: keep the parsed forms of the recent ones.
@lru_cache(maxsize=1024)
def _compile(pattern: str) -> tuple[_Segment, ...]:
    compiled: list[_Segment] = []
    for segment in pattern.split("/"):
        if segment == _ANY_SEGMENTS:
            if compiled and compiled[-1] is None:
                continue  # `**/**` matches exactly what `**` does
            compiled.append(None)
        else:
            compiled.append(tuple(segment.split("*")))
    return tuple(compiled)


def _skip_any_segments(segments: tuple[_Segment, ...], positions: set[int]) -> set[int]:
    """The positions plus those reached by letting `**`s match zero segments."""
    closed = set(positions)
    for position in positions:
        while position < len(segments) and segments[position] is None:
            position += 1
            closed.add(position)
    return closed


def _segment_matches(pieces: tuple[str, ...], part: str) -> bool:
    if len(pieces) == 1:
        return pieces[0] == part
    first, *middle, last = pieces
    if len(part) < len(first) + len(last) or not part.startswith(first):
        return False
    if not part.endswith(last):
        return False
    # With `*` as the only wildcard, taking the leftmost occurrence of each middle piece never
    # loses a match: it leaves the most room for the pieces after it.
    position, end = len(first), len(part) - len(last)
    for piece in middle:
        found = part.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True
