"""What can go wrong, as types a caller can catch."""

from __future__ import annotations

from ._offset import Offset


class DurableStreamError(Exception):
    """Base of every client error. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StreamNotFound(DurableStreamError):
    """404: no stream at this URL."""


class StreamGone(DurableStreamError):
    """410: the stream was deleted (only its forks still read its data)."""


class OffsetGone(StreamGone):
    """410 to a read: the stream is there, but the data at `offset` (what the read asked for;
    None when unknown) was dropped under the stream's retention policy. `earliest_offset` is
    where reading may start again (None when the server did not say: `Offset.BEGINNING` then
    starts there). A read with `on_gone="earliest"` goes on from it instead of raising."""

    def __init__(
        self,
        message: str,
        status: int | None = 410,
        *,
        offset: Offset | None = None,
        earliest_offset: Offset | None = None,
    ) -> None:
        super().__init__(message, status)
        self.offset = offset
        self.earliest_offset = earliest_offset


class StreamConflict(DurableStreamError):
    """409: a stream exists with another configuration, or the write does not fit its state."""


class StreamClosed(StreamConflict):
    """409: the stream is closed; nothing more can be appended."""


class SequenceConflict(StreamConflict):
    """409: the append's `stream_seq` is not above the last one the stream accepted (another
    writer got there first, or this append was already applied); nothing was written."""


class AccessDenied(DurableStreamError):
    """401 (no token, or one the server refused) or 403 (the token or signed URL does not
    allow this request)."""


class BadRequest(DurableStreamError):
    """400, 413, 415 and other refusals of the request itself."""


class Unavailable(DurableStreamError):
    """The server kept failing (5xx, 429, connection errors) through every retry allowed."""


class UntilNotSupported(DurableStreamError):
    """A read bounded by `until` got an answer that runs past the bound: the server does not
    implement the `until` extension. Nothing of that answer was handed over."""


class OutcomeUnknown(DurableStreamError):
    """A write may or may not have been applied: the request may have reached the server and
    its answer was lost. Retrying it blindly could write it twice. Read the stream (or use an
    idempotent producer, whose retries are safe) to find out."""
