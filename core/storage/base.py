"""The stream store interface: small enough to read in one screen."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..protocol.append import AppendIntent
from .model import (
    AppendOutcome,
    CreateOutcome,
    CreateSpec,
    Payload,
    Presence,
    ReadBatch,
    Snapshot,
    StreamInfo,
    StreamPage,
)

# Runs a store call for a caller on an event loop (on a thread, or right there).
Runner = Callable[..., Awaitable[Any]]


class StreamStore(Protocol):
    def get(self, path: str) -> StreamInfo | None:
        """A consistent snapshot of a live stream (soft-deleted ones included); None if absent
        or expired."""

    def list_streams(self, prefix: str, cursor: str | None, page_items: int) -> StreamPage:
        """Live streams under `prefix`, a page at a time from `cursor` (None: the start)."""

    def create(self, path: str, spec: CreateSpec) -> CreateOutcome:
        """Create the stream, or report the one already at `path`."""

    def append(self, path: str, intent: AppendIntent, payload: Payload) -> AppendOutcome:
        """Decide and commit one append / close atomically with its producer state."""

    async def append_async(
        self, path: str, intent: AppendIntent, payload: Payload, run: Runner
    ) -> AppendOutcome:
        """`append` on an event loop: waits made there, store calls through `run`."""

    def read(self, info: StreamInfo, start: int, max_bytes: int, whole: bool = False) -> ReadBatch:
        """Committed data from `start`, up to `info.tail` and about `max_bytes`, in whole
        appends (messages, for JSON) unless the first is larger; `whole`: from the start of
        the append `start` lies inside, if it does."""

    def snapshot_messages(self, snapshot: Snapshot) -> tuple[bytes, ...]:
        """The messages of a compacted stream's snapshot, served before the data after it."""

    def renew(self, info: StreamInfo) -> None:
        """Slide a TTL stream's expiry forward after a read (cheap; writes only when due)."""

    def delete(self, path: str) -> Presence:
        """Delete the stream (FOUND), or say it was not there."""
