"""JSON mode: validate a body and split it into messages, keeping each message's own bytes."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .errors import bad_request

# Numbers are kept as text: we only validate and split, and int() would refuse long ones.
_DECODER = json.JSONDecoder(
    parse_constant=lambda name: _reject_constant(name), parse_int=str, parse_float=str
)
_WHITESPACE = " \t\n\r"


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _skip_ws(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def split_messages(body: bytes, *, allow_empty_array: bool) -> list[bytes]:
    """The messages of a JSON body: a top-level array is flattened one level.

    Each message keeps the exact bytes the client sent (without surrounding whitespace),
    so a reader gets back what was written, not a re-serialisation.
    """
    try:
        text = body.decode("utf-8")
        _DECODER.decode(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad_request(f"body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise bad_request("JSON body is nested too deeply") from exc
    start = _skip_ws(text, 0)
    if text[start] != "[":
        return [text.strip(_WHITESPACE).encode("utf-8")]
    messages: list[bytes] = []
    index = _skip_ws(text, start + 1)
    if text[index] == "]":
        if not allow_empty_array:
            raise bad_request("an empty JSON array appends nothing")
        return messages
    while True:
        _, end = _DECODER.raw_decode(text, index)
        messages.append(text[index:end].encode("utf-8"))
        index = _skip_ws(text, end)
        if text[index] == "]":
            return messages
        index = _skip_ws(text, index + 1)  # past the comma


def join_messages(messages: list[bytes]) -> bytes:
    """A JSON array of the given messages, as a read response body."""
    return b"[" + b",".join(messages) + b"]"


# How `join_lines` lays an array out: what opens it, separates two messages, and closes it.
LINES_OPEN = b"[\n"
LINES_SEPARATOR = b",\n"
LINES_CLOSE = b"\n]"


def join_lines(messages: Sequence[bytes]) -> bytes:
    """The same array with each message on a line of its own (`[`, then each message followed
    by `,` but the last, then `]`, each on its own line), when no message holds a line break
    (then no `\n` but those separates two messages); otherwise, and for no message,
    `join_messages`'s. Stored messages never begin with whitespace, so only this layout
    begins with `[\n`: a reader tells the two apart by that, and `split_lines` splits it."""
    if not messages:
        return b"[]"
    # The brackets go onto the first and last message (small copies), so that the body is
    # made in one join rather than copied again for each bracket.
    parts = list(messages)
    parts[0] = LINES_OPEN + parts[0]
    parts[-1] = parts[-1] + LINES_CLOSE
    body = LINES_SEPARATOR.join(parts)
    if body.count(b"\n") != len(messages) + 1:
        return join_messages(list(messages))
    return body


def split_lines(body: bytes) -> list[bytes] | None:
    """The messages of a `join_lines` body laid out a line each (None: it is not, or a line
    break is not where that layout puts them)."""
    inside = lines_inside(body)
    if inside is None:
        return None
    messages = inside.split(LINES_SEPARATOR)
    return messages if body.count(b"\n") == len(messages) + 1 else None


def lines_inside(body: bytes) -> bytes | None:
    """What lies between the brackets of a body that opens and closes as `join_lines` lays
    one out (None: it does not)."""
    span = lines_span(body)
    return None if span is None else body[span[0] : span[1]]


def lines_span(body: bytes) -> tuple[int, int] | None:
    """Where what `lines_inside` finds begins and ends in `body` (None: it finds nothing)."""
    laid_out = body.startswith(LINES_OPEN) and body.endswith(LINES_CLOSE)
    if not laid_out or len(body) < len(LINES_OPEN) + len(LINES_CLOSE):
        return None
    return len(LINES_OPEN), len(body) - len(LINES_CLOSE)
