"""Snapshot objects: a compacted stream's State Protocol snapshot, as one S3 object.

The object is a small header (a magic word and the number of messages), the messages' lengths
packed as in chunk items, then the messages' bytes. It is written once under a fresh key of the
stream's incarnation, named by an item of that incarnation's partition before any stream item
points at it (`core.storage.retention`), and read whole: a snapshot is served in one response.
"""

from __future__ import annotations

import struct
import threading
import uuid
from collections import OrderedDict

from . import _items as items
from ._chunk_layout import data_prefix

_MAGIC = b"DSS1"
_HEADER = struct.Struct("<4sI")


class BadSnapshot(ValueError):
    """An object that is not a snapshot this module wrote."""


def snapshot_key(incarnation: str) -> str:
    return f"{data_prefix(incarnation)}snap-{uuid.uuid4().hex}"


def encode_snapshot(messages: tuple[bytes, ...]) -> bytes:
    lengths = items.pack_lengths(tuple(len(message) for message in messages))
    return _HEADER.pack(_MAGIC, len(messages)) + lengths + b"".join(messages)


def decode_snapshot(raw: bytes) -> tuple[bytes, ...]:
    if len(raw) < _HEADER.size:
        raise BadSnapshot("too short for a snapshot")
    magic, count = _HEADER.unpack_from(raw)
    data_at = _HEADER.size + 4 * count
    if magic != _MAGIC or len(raw) < data_at:
        raise BadSnapshot("not a snapshot object")
    lengths = items.unpack_lengths(raw[_HEADER.size : data_at])
    if data_at + sum(lengths) != len(raw):
        raise BadSnapshot("a snapshot's lengths do not match its bytes")
    messages, at = [], data_at
    for length in lengths:
        messages.append(raw[at : at + length])
        at += length
    return tuple(messages)


class SnapshotCache:
    """Snapshots this process has read, newest kept, within a byte budget: a snapshot object
    is never rewritten, so what it holds stays true for as long as anything names it."""

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self._lock = threading.Lock()
        self._known: OrderedDict[str, tuple[bytes, ...]] = OrderedDict()
        self._bytes = 0
        self._max = max_bytes

    def get(self, key: str) -> tuple[bytes, ...] | None:
        with self._lock:
            found = self._known.get(key)
            if found is not None:
                self._known.move_to_end(key)
            return found

    def remember(self, key: str, messages: tuple[bytes, ...]) -> None:
        size = sum(map(len, messages))
        if size > self._max:
            return
        with self._lock:
            if key in self._known:
                return
            self._known[key] = messages
            self._bytes += size
            while self._bytes > self._max:
                _, dropped = self._known.popitem(last=False)
                self._bytes -= sum(map(len, dropped))
