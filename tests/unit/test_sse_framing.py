"""SSE framing read back the way every SSE parser reads it (one space after `data:` removed)."""

from __future__ import annotations

import base64

import pytest

from durable_streams_aws.client._sse import EventParser
from durable_streams_aws.core.protocol.sse import data_event


def parsed(event: bytes) -> str:
    (only,) = list(EventParser().feed(event))
    assert only.name == "data"
    return only.data


@pytest.mark.parametrize(
    "payload",
    [" the", "  two spaces", "no space", " a\n b\nc", "x\n\n y", " ", "", "tab\tand :colon"],
)
def test_text_survives_a_standard_parser(payload: str) -> None:
    assert parsed(data_event(payload.encode(), "text/plain")) == payload


def test_line_breaks_arrive_as_lf() -> None:
    assert parsed(data_event(b" a\r\n b\rc", "text/plain")) == " a\n b\nc"


def test_the_usual_lines_keep_the_compact_form() -> None:
    assert data_event(b"line1\nline2", "text/plain") == b"event: data\ndata:line1\ndata:line2\n\n"


def test_binary_travels_as_base64() -> None:
    raw = bytes(range(256))
    assert base64.b64decode(parsed(data_event(raw, "application/octet-stream"))) == raw
