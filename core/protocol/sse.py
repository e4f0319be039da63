"""Server-Sent Events framing for stream reads (protocol section 5.8)."""

from __future__ import annotations

import base64
import json
import re

from .headers import is_json, media_type

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def uses_base64(content_type: str) -> bool:
    """Text and JSON travel as UTF-8; every other content type as base64."""
    return not (media_type(content_type).startswith("text/") or is_json(content_type))


_DATA = b"data:"


def _data_line(line: bytes) -> bytes:
    """`data:` and the line; one space more when the line itself begins with one, because an
    SSE parser removes one space after the colon (a token such as " the" keeps its space)."""
    return (b"data: " if line.startswith(b" ") else _DATA) + line + b"\n"


def data_event(payload: bytes, content_type: str) -> bytes:
    """One `data` event. Every CR, LF or CRLF in the payload starts a new `data:` line, so
    nothing inside a payload can end the event or forge another one."""
    if uses_base64(content_type):
        return b"event: data\n" + _DATA + base64.b64encode(payload) + b"\n\n"
    lines = _LINE_BREAK.split(payload)
    return b"event: data\n" + b"".join(_data_line(line) for line in lines) + b"\n"


def control_event(next_offset: str, cursor: str | None, up_to_date: bool, closed: bool) -> bytes:
    body: dict[str, object] = {"streamNextOffset": next_offset}
    if closed:
        body["upToDate"] = True
        body["streamClosed"] = True
    else:
        if cursor is not None:
            body["streamCursor"] = cursor
        if up_to_date:
            body["upToDate"] = True
    return b"event: control\n" + _DATA + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
