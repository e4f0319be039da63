"""How an automatic live read (`live="auto"`) chooses its transport and when it gives SSE up.

Pure decisions; the sync and async clients act on them. An automatic read catches up with plain
reads (large, cacheable answers), then follows live: by SSE where SSE carries the stream's bytes
exactly, by long-poll otherwise, and by long-poll from where SSE stopped if SSE proves unusable.
Giving SSE up never ends the read: only the end of a closed stream does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import httpx

from ._wire import is_json

Transport = Literal["sse", "long-poll"]

# Answers to an SSE request that say this server (or a proxy in front of it) does not do SSE,
# whereas the same read by long-poll may well work. Anything else is handled as for any read.
SSE_REFUSALS = frozenset({400, 405, 406, 415, 501})

# What an SSE connection that ended without an event counts as, for the retry decisions.
SILENT_END = httpx.RemoteProtocolError("the event stream ended without an event")


def live_transport(content_type: str | None) -> Transport:
    """SSE for JSON (messages are re-parsed, so line breaks do not matter) and binary streams
    (base64 keeps every byte); long-poll for text, whose CR bytes SSE lines cannot carry."""
    media = (content_type or "").split(";")[0].strip().lower()
    return "long-poll" if media.startswith("text/") and not is_json(media) else "sse"


@dataclass
class SseHealth:
    """Tells healthy SSE connections (they delivered a control event, or lasted) from ones that
    end quickly without telling anything, as behind a proxy that buffers or cuts event streams.
    After `max_short` of those in a row an automatic read goes on by long-poll."""

    max_short: int = 3
    min_seconds: float = 1.0
    short_in_a_row: int = 0

    def refused(self, status: int) -> bool:
        return status in SSE_REFUSALS

    def connection_ended(self, seconds: float, told_something: bool) -> bool:
        """Record one connection's end; true when it was healthy."""
        if told_something or seconds >= self.min_seconds:
            self.short_in_a_row = 0
            return True
        self.short_in_a_row += 1
        return False

    @property
    def given_up(self) -> bool:
        return self.short_in_a_row >= self.max_short
