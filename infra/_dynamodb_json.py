"""DynamoDB's wire encoding of an item operation's result: plain JSON, binary values in base64.

Pure (no moto import), so that the journal's compaction and moto's patches share it, and the
compaction still works on a moto version the patches were not tested with.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from typing import Any

CONTENT_TYPE = "application/x-amz-json-1.0"


def _base64(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"not JSON-encodable in a DynamoDB item response: {type(value).__name__}")


# Binary values at least this long are spliced into the body rather than encoded by `json`.
_SPLICED_BYTES = 4096


def encode(result: dict[str, Any]) -> str:
    """The response body DynamoDB would send for `result`.

    A page of large binary values (a catch-up read: a megabyte of chunks) spent more time in
    `json` escaping their base64 text, which never needs escaping, than in encoding it. Large
    values are encoded as a placeholder holding a random marker, and their base64 text is
    spliced in its place afterwards; should the markers not come out exactly once each, in
    order (a stored string holding the marker), the body is encoded the plain way."""
    spliced: list[bytes] = []
    marker = secrets.token_hex(8)

    def placeholder(value: object) -> str:
        if type(value) is not bytes:
            return _base64(value)
        if len(value) < _SPLICED_BYTES:
            return binascii.b2a_base64(value, newline=False).decode("ascii")
        spliced.append(value)
        return f"{marker}:{len(spliced) - 1}:"

    text = json.dumps(result, default=placeholder, separators=(",", ":"))
    if not spliced:
        return text
    pieces = text.split(marker)
    if len(pieces) != len(spliced) + 1:
        return json.dumps(result, default=_base64, separators=(",", ":"))
    out = [pieces[0]]
    for number, (value, piece) in enumerate(zip(spliced, pieces[1:], strict=True)):
        label = f":{number}:"
        if not piece.startswith(label):
            return json.dumps(result, default=_base64, separators=(",", ":"))
        out.append(binascii.b2a_base64(value, newline=False).decode("ascii"))
        out.append(piece[len(label) :])
    return "".join(out)
