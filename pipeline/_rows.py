"""Rows from what a read returned: one row per message for JSON streams, one row per read for
byte and text streams (which have no message boundaries), and one row per message of a
compacted stream's snapshot, each carrying the snapshot's token as its offset. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from durable_streams_aws.core.protocol.headers import is_json, media_type
from durable_streams_aws.core.protocol.offsets import format_offset, parse_offset
from durable_streams_aws.core.storage import ReadBatch

from ._responses import response_messages

SCHEMA_FIELDS = ("stream", "offset", "message", "content_type")
VALUE_FIELD = "value"  # the parsed message, with the `jsonSchema` option


def message_type(content_types: list[str]) -> str:
    """STRING when every stream read is JSON or text, BINARY otherwise."""
    textual = all(is_textual(content_type) for content_type in content_types)
    return "STRING" if textual else "BINARY"


def schema_ddl(content_types: list[str], json_schema: str | None = None) -> str:
    kind = message_type(content_types)
    ddl = f"stream STRING, offset STRING, message {kind}, content_type STRING"
    return ddl if json_schema is None else f"{ddl}, {VALUE_FIELD} STRUCT<{json_schema}>"


@dataclass(frozen=True)
class SnapshotRead:
    """A compacted stream's snapshot, read at its token (`..._s`): `snapshot-start`, one
    `insert` per row of the state it folds the history before `end` into, `snapshot-end`.
    Its messages were never at any position of the stream, so each one's row carries the
    token, which sorts after every offset before `end` and before every one after it."""

    token: str
    messages: tuple[bytes, ...]

    @property
    def end(self) -> str:
        """The plain offset where the history after the snapshot goes on."""
        return format_offset(parse_offset(self.token).at)

    @property
    def size(self) -> int:
        return sum(map(len, self.messages))


@dataclass(frozen=True)
class LinedRead:
    """A JSON read response laid out a message per line (`jsonmode.join_lines`), from `start`
    to `end`: the body as it came, split only where its rows are made (by Arrow, for Spark:
    no Python object per message)."""

    start: int
    end: int
    body: bytes

    @property
    def messages(self) -> tuple[bytes, ...]:
        return tuple(response_messages(self.body))


# What a partition's read yields: the store's batches, and over HTTP a JSON body kept whole.
Read = ReadBatch | LinedRead | SnapshotRead


def rows(
    stream: str,
    content_type: str,
    batch: Read,
    as_text: bool,
    parse: Callable[[bytes], Any] | None = None,
) -> Iterator[tuple]:
    """The rows of one batch. `offset` is the offset after the row's message: for JSON, each
    message's own end (this server's offsets count the bytes of the messages before them); a
    snapshot's rows all carry its token. With `parse`, each JSON row also carries the parsed
    message."""
    if isinstance(batch, SnapshotRead):
        for raw in batch.messages:
            message = raw.decode() if as_text else raw
            row = (stream, batch.token, message, content_type)
            yield row if parse is None else (*row, parse(raw))
        return
    messages = batch.messages
    if messages is None:
        assert isinstance(batch, ReadBatch)
        if batch.data:
            message = batch.data.decode() if as_text else batch.data
            yield (stream, format_offset(batch.end, batch.inside), message, content_type)
        return
    at = batch.start
    for raw in messages:
        at += len(raw)
        message = raw.decode() if as_text else raw
        row = (stream, format_offset(at), message, content_type)
        yield row if parse is None else (*row, parse(raw))
    if at != batch.end:
        raise ValueError(f"{stream}: messages end at {at}, the read at {batch.end}")


def is_textual(content_type: str) -> bool:
    return is_json(content_type) or media_type(content_type).startswith("text/")
