"""How an automatic live read (`live="auto"`) chooses its transport and when it gives SSE up.

Pure decisions; the sync and async clients act on them. An automatic read catches up with plain
reads (large, cacheable answers), then follows live: by SSE where SSE carries the stream's bytes
exactly, by long-poll otherwise, and by long-poll from where SSE stopped if SSE proves unusable.
Giving SSE up never ends the read: only the end of a closed stream does.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
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


class Connection(Enum):
    """How an SSE connection that got an answer ended."""

    PROGRESSED = "progressed"  # it moved the offset on, or reached the end of the stream
    ALIVE = "alive"  # it told where the stream stands and lasted: an idle stream, all is well
    QUIET = "quiet"  # it lasted without a single control event: events are held up somewhere
    SHORT = "short"  # it ended at once without moving on: a failure, to retry with backoff


@dataclass
class SseHealth:
    """Judges the SSE connections of one read. A server announces where the stream stands as
    soon as a connection opens, so a connection that neither moves on nor lasts, or lasts
    without one control event, means something in between buffers or cuts event streams.
    After `max_short` such connections in a row an automatic read goes on by long-poll.
    Connections never answered (the server is down or restarting) are not judged here: they
    are ordinary failures and say nothing about SSE."""

    max_short: int = 3
    min_seconds: float = 0.5
    short_in_a_row: int = 0

    def refused(self, status: int) -> bool:
        return status in SSE_REFUSALS

    def connection_ended(self, seconds: float, told: bool, progressed: bool) -> Connection:
        if progressed:
            verdict = Connection.PROGRESSED
        elif seconds < self.min_seconds:
            verdict = Connection.SHORT
        else:
            verdict = Connection.ALIVE if told else Connection.QUIET
        healthy = verdict in (Connection.PROGRESSED, Connection.ALIVE)
        self.short_in_a_row = 0 if healthy else self.short_in_a_row + 1
        return verdict

    @property
    def given_up(self) -> bool:
        return self.short_in_a_row >= self.max_short
