"""The HTTP/1.1 front door of `dsaws serve`: uvicorn's httptools protocol, bounded.

uvicorn bounds neither the request head nor the time a client may take to send it: a 50 MB
header was read in full, and a connection that stopped after its request line stayed open. In a
deployment the Function URL and CloudFront bound both; here this protocol does, as nginx's
defaults do:

- the request line is at most 8 KiB (414), a header line at most 8 KiB and the whole head at
  most 64 KiB (431), refused as soon as the bytes read say so, whatever the parser has buffered;
- a head must arrive within `head_timeout` of its first byte, or of the connection's opening
  (408 when some of it came, else the connection is just closed);
- a body may pause for at most `body_idle_timeout` while the app waits for it (408);
- `Transfer-Encoding` may only be `chunked`: the body would reach the app still encoded (501).

Each refusal is one log line and a short text body, and closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

logger = logging.getLogger("dsaws")
# How long a refused connection is still read (and what arrives dropped) before it closes.
LINGER_SECONDS = 1.0


@dataclass(frozen=True)
class FrontDoorLimits:
    max_request_line_bytes: int = 8 * 1024
    max_header_bytes: int = 8 * 1024  # one header line: name, value, separator and CRLF
    max_head_bytes: int = 64 * 1024
    head_timeout: float = 10.0
    body_idle_timeout: float = 30.0


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    limits: ClassVar[FrontDoorLimits] = FrontDoorLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # between requests, or reading one's head
        self._head_bytes_read = 0  # bytes fed while the head stayed incomplete
        self._head_size = 0  # the request line and header lines parsed so far
        self._transfer_codings: list[bytes] = []
        self._heads_completed = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._refused = False

    # ------------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()  # a connection that never sends a byte is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head and self._head_timer is None:
            self._arm_head_timer()
        was_in_head, heads_before = self._in_head, self._heads_completed
        super().data_received(data)
        if self._refused or not was_in_head or self._heads_completed != heads_before:
            # Only bytes that all belong to one unfinished head are counted here: where a
            # head or a message ended in them, the next head's start among them is less than
            # one read, and counted from the next read on.
            return
        # The parser keeps a header's value until its line ends: bound what it may hold.
        self._head_bytes_read += len(data)
        if self._head_bytes_read > self.limits.max_head_bytes:
            self._refuse(431, "the request's headers are too large")

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # a refusal already answered, and the connection is closing
            super().send_400_response(msg)

    # ------------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_size = 0
        self._transfer_codings = []

    def on_url(self, url: bytes) -> None:
        if self._refused:
            return
        super().on_url(url)
        self._head_size += len(url)
        if len(self.url) > self.limits.max_request_line_bytes:
            self._refuse(414, "the request's URL is too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._refused:
            return
        line = len(name) + len(value) + 4
        self._head_size += line
        if line > self.limits.max_header_bytes:
            self._refuse(431, f"a header is larger than {self.limits.max_header_bytes} bytes")
            return
        if self._head_size > self.limits.max_head_bytes:
            self._refuse(431, "the request's headers are too large")
            return
        if name.lower() == b"transfer-encoding":
            self._transfer_codings += [c.strip().lower() for c in value.split(b",")]
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        self._in_head = False
        self._head_bytes_read = 0
        self._heads_completed += 1
        self._cancel_head_timer()
        if self._transfer_codings and self._transfer_codings != [b"chunked"]:
            self._refuse(501, "the only transfer coding accepted is chunked")
            return
        super().on_headers_complete()
        self._arm_body_timer()

    def on_body(self, body: bytes) -> None:
        if self._refused:
            return
        super().on_body(body)
        self._arm_body_timer()

    def on_message_complete(self) -> None:
        if self._refused:
            return
        super().on_message_complete()
        self._cancel_body_timer()
        self._in_head = True  # the next request's head, when its bytes come

    # ------------------------------------------------------------------ timers

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.limits.head_timeout, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._in_head or self.transport.is_closing():
            return
        if self._head_bytes_read or self._head_size:
            self._refuse(408, "the request's headers took too long to arrive")
        else:
            self.transport.close()  # nothing was asked: nothing to answer

    def _arm_body_timer(self) -> None:
        self._cancel_body_timer()
        self._body_timer = self.loop.call_later(self.limits.body_idle_timeout, self._body_timed_out)

    def _body_timed_out(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self._in_head or cycle is None or self.transport.is_closing():
            return
        if self.flow.read_paused:  # the app has not asked for more yet: the wait is ours
            self._arm_body_timer()
            return
        self._refuse(408, "the request's body stopped arriving")

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _cancel_timers(self) -> None:
        self._cancel_head_timer()
        self._cancel_body_timer()

    # ------------------------------------------------------------------ refusals

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with a short text body and close: whatever else the client sends
        on this connection is ignored."""
        self._refused = True
        self._cancel_timers()
        cycle = self.cycle
        answering = cycle is not None and cycle.response_started and not cycle.response_complete
        if cycle is not None and not cycle.response_complete:
            # The app is told the client has gone; whatever it answers after that is dropped.
            cycle.disconnected = True
            cycle.message_event.set()
        if answering:  # half an answer is on the wire: no other can follow it
            self.transport.close()
            return
        logger.info("refused a request from %s: %s %s", _peer(self.client), status, message)
        body = (message + "\n").encode()
        self.transport.write(
            STATUS_LINE[status]
            + b"content-type: text/plain; charset=utf-8\r\n"
            + b"content-length: %d\r\n" % len(body)
            + b"cache-control: no-store\r\nconnection: close\r\n\r\n"
            + body
        )
        # A lingering close, as nginx's: closing with the client's bytes still unread would
        # reset the connection, and the client could lose the answer. Its sending side is
        # shut, what still arrives is dropped, and the socket closes shortly.
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()


def bounded_protocol(limits: FrontDoorLimits) -> type[BoundedHttpToolsProtocol]:
    """The protocol class for uvicorn's `http` setting, with these limits."""
    return type("BoundedHttpToolsProtocol", (BoundedHttpToolsProtocol,), {"limits": limits})


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"
