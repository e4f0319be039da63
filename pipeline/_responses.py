"""The messages of a JSON read response, split without validating the whole body again: the
server validated every message when it was appended and answers with them in a JSON array.
The source asks for it laid out a message per line (`jsonmode.join_lines`), which splits at
its line breaks; a body in the usual layout (`jsonmode.join_messages`: a server or cache that
did not take the ask) is split by scanning each message. Either way the same messages, byte
for byte, as `jsonmode.split_messages` gives for the body. Pure."""

from __future__ import annotations

import json

from durable_streams_aws.core.protocol.jsonmode import split_lines

# Numbers are kept as text, as the server's split does: only where each message ends matters.
_DECODER = json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str)
_WHITESPACE = " \t\n\r"


def response_messages(body: bytes) -> list[bytes]:
    """Each message of a response body: the elements of its top-level array (or the body,
    when it is not an array), without their surrounding whitespace."""
    lines = split_lines(body)
    if lines is not None:
        return lines
    text = body.decode("utf-8")
    ascii_only = body.isascii()  # then character positions are byte positions
    start = _skip(text, 0)
    if start == len(text):
        return []
    if text[start] != "[":
        return [text.strip(_WHITESPACE).encode("utf-8")]
    messages: list[bytes] = []
    index = _skip(text, start + 1)
    if text[index] == "]":
        return messages
    while True:
        _, end = _DECODER.raw_decode(text, index)
        messages.append(body[index:end] if ascii_only else text[index:end].encode("utf-8"))
        index = _skip(text, end)
        if text[index] == "]":
            return messages
        if text[index] != ",":
            raise ValueError(f"a read response is not a JSON array: {text[index]!r} at {index}")
        index = _skip(text, index + 1)


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index
