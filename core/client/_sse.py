"""SSE reads without I/O: events parsed from bytes as they arrive, and batches made of them.

A batch is handed over at each `control` event (it carries the offset after the data before
it). A connection that ends without `streamClosed` is only a reconnection from the last control
event's offset, never the end of the read. Text travels as SSE lines, whose line breaks arrive
as LF whatever they were; read with long-poll where exact CR bytes matter.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

from ._offset import Offset
from ._wire import Batch, OnGone, Request, is_json, restart_after_gone


@dataclass(frozen=True)
class Event:
    name: str
    data: str


class EventParser:
    """Feed bytes, get complete events (the text/event-stream format: fields per line, an
    empty line ends an event)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._name = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> Iterator[Event]:
        self._buffer += chunk
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                return
            end, after = cut
            line = self._buffer[:end].decode("utf-8", errors="replace")
            self._buffer = self._buffer[after:]
            if line == "":
                if self._data or self._name:
                    yield Event(self._name or "message", "\n".join(self._data))
                self._name, self._data = "", []
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                self._name = value
            elif field == "data":
                self._data.append(value)


def _line_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the first line ends and the next begins (CRLF, LF or CR); a CR at the very end
    may be the first half of a CRLF, so wait for more."""
    for index, byte in enumerate(buffer):
        if byte == 0x0A:
            return index, index + 1
        if byte == 0x0D:
            if index + 1 == len(buffer):
                return None
            return index, index + (2 if buffer[index + 1] == 0x0A else 1)
    return None


class SseSession:
    """Where an SSE reader stands: the offset and cursor to reconnect with, the data received
    since the last control event, and whether the stream's end has been handed over."""

    def __init__(self, start: Offset, cursor: str | None = None, on_gone: OnGone = "raise") -> None:
        self.offset = start
        self.cursor = cursor
        self.on_gone = on_gone
        # The offset a restart (`on_gone="earliest"`) skipped from, until a batch carries it.
        self.skipped_from: Offset | None = None
        self.finished = False
        self.controls = 0  # control events received, over every connection
        self.content_type: str | None = None
        self.base64 = False
        self._pending: list[bytes] = []
        self._messages: list[object] = []
        self._parser = EventParser()

    def request(self) -> Request:
        params = {"offset": self.offset.token, "live": "sse"}
        if self.cursor is not None:
            params["cursor"] = self.cursor
        return Request("GET", params=params)

    def restart(self, response: httpx.Response) -> bool:
        """Whether a refused connection is to be made again from the earliest offset still
        kept (its offset was dropped under the stream's retention, and `on_gone` says so)."""
        going = restart_after_gone(response, self.offset, self.on_gone)
        if going is None:
            return False
        self.skipped_from = self.skipped_from or self.offset
        self.offset = going
        return True

    def connected(self, content_type: str | None, data_encoding: str | None) -> None:
        """A new connection: what it carries, and a clean parser (a half event is dropped; its
        data comes again from the last control event's offset)."""
        self.content_type = content_type or self.content_type
        self.base64 = (data_encoding or "").lower() == "base64"
        self._parser = EventParser()
        self._pending, self._messages = [], []

    def feed(self, chunk: bytes) -> Iterator[Batch]:
        for event in self._parser.feed(chunk):
            if event.name == "data":
                self._data(event.data)
            elif event.name == "control":
                batch = self._control(json.loads(event.data))
                if batch is not None:
                    yield batch

    def _data(self, text: str) -> None:
        payload = base64.b64decode(text) if self.base64 else text.encode()
        self._pending.append(payload)
        if is_json(self.content_type) and payload.strip():
            self._messages.extend(json.loads(payload))

    def _control(self, control: dict[str, object]) -> Batch | None:
        self.controls += 1
        start = self.offset
        self.offset = Offset(str(control["streamNextOffset"]))
        cursor = control.get("streamCursor")
        self.cursor = str(cursor) if cursor is not None else self.cursor
        closed = control.get("streamClosed") is True
        up_to_date = closed or control.get("upToDate") is True
        data = b"".join(self._pending)
        messages = list(self._messages) if is_json(self.content_type) else None
        self._pending, self._messages = [], []
        if closed:
            self.finished = True
        if not data and not closed and self.offset == start:
            return None  # only where it stands: nothing to hand over
        skipped, self.skipped_from = self.skipped_from, None
        return Batch(start, self.offset, data, messages, up_to_date, closed, skipped_from=skipped)
