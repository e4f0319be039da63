"""Rows from what a read returned: one row per message for JSON streams, one row per read for
byte and text streams (which have no message boundaries). Pure."""

from __future__ import annotations

from collections.abc import Iterator

from core.client import Batch
from core.client._wire import is_json
from core.protocol.jsonmode import split_messages
from core.protocol.offsets import format_offset, parse_position

SCHEMA_FIELDS = ("stream", "offset", "message", "content_type")


def message_type(content_types: list[str]) -> str:
    """STRING when every stream read is JSON or text, BINARY otherwise."""
    textual = all(_is_textual(content_type) for content_type in content_types)
    return "STRING" if textual else "BINARY"


def schema_ddl(content_types: list[str]) -> str:
    kind = message_type(content_types)
    return f"stream STRING, offset STRING, message {kind}, content_type STRING"


def rows(stream: str, content_type: str, batch: Batch, as_text: bool) -> Iterator[tuple]:
    """The rows of one batch. `offset` is the offset after the row's message: for JSON, each
    message's own end (this server's offsets count the bytes of the messages before them)."""
    if not batch.data:
        return
    if not is_json(content_type):
        message = batch.data.decode() if as_text else batch.data
        yield (stream, batch.next_offset.token, message, content_type)
        return
    position = _start_position(batch)
    for raw in split_messages(batch.data, allow_empty_array=True):
        position += len(raw)
        message = raw.decode() if as_text else raw
        yield (stream, format_offset(position), message, content_type)
    if format_offset(position) != batch.next_offset.token:
        raise ValueError(f"{stream}: messages end at {position}, the read at {batch.next_offset}")


def _start_position(batch: Batch) -> int:
    return 0 if batch.offset.is_beginning else parse_position(batch.offset.token)


def _is_textual(content_type: str) -> bool:
    return is_json(content_type) or content_type.strip().lower().startswith("text/")
