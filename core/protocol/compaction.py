"""State Protocol compaction: folding a JSON stream's change messages into a snapshot.

The State Protocol (`@durable-streams/state`) writes change messages, `{"type", "key", "value",
"headers": {"operation": "insert" | "update" | "delete", ...}}`, and control messages,
`{"headers": {"control": "snapshot-start" | "snapshot-end" | "reset"}}`. Folding a history
keeps, for each `type`/`key` still present at its end, its row as the package's own
materializer (`createStreamDB`) builds it: an insert or update of an object value merges its
fields into the row (a missing row is created; an insert of a row already there merges like
an update), any other value replaces it, a delete removes it, a reset removes every row; the
snapshot markers carry no rows. The snapshot of the fold is `snapshot-start`, one `insert` per
row with its whole value, in the order rows were last written, and `snapshot-end`: a reader that
folds it gets what it would have got from the history.

A history holding anything else (a message that is not a JSON object, or one that is neither
a change nor a control message) is not folded: the stream is refused compaction, with the
reason, and keeps every message as it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# `upsert`: what the package's own schema helpers write for an insert-or-update.
OPERATIONS = frozenset({"insert", "update", "upsert", "delete"})
CONTROLS = frozenset({"snapshot-start", "snapshot-end", "reset"})


@dataclass(frozen=True)
class Refusal:
    """Why a history cannot be folded, and where (the index of the message)."""

    index: int
    reason: str
    too_large: bool = False  # the state, not a message: a later, smaller state may fold

    def __str__(self) -> str:
        return f"message {self.index}: {self.reason}"


@dataclass
class StateFold:
    """The rows a history leaves, by (type, key), in the order they were last written (the
    order the package's materializer stamps them in). `limit`: a fold whose rows come to
    more than this many bytes of messages is refused early (its memory stays bounded)."""

    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    messages: int = 0  # messages folded so far
    limit: int | None = None
    _sizes: dict[tuple[str, str], int] = field(default_factory=dict)
    _size: int = 0  # an upper bound of the rows' bytes (merges counted whole)

    def apply(self, raw: bytes) -> Refusal | None:
        """Fold one message; a Refusal (and nothing changed) when it is not one this fold
        understands."""
        index = self.messages
        try:
            message = json.loads(raw, parse_float=_finite, parse_constant=_no_constant)
        except _NotPortable as exc:
            return Refusal(index, str(exc))
        except ValueError:
            return Refusal(index, "not JSON")
        refusal = _check(message, index)
        if refusal is not None:
            return refusal
        self.messages += 1
        headers = message["headers"]
        control = headers.get("control")
        if control is not None:
            if control == "reset":
                self.rows.clear()
                self._sizes.clear()
                self._size = 0
            return None
        row_key = (message["type"], message["key"])
        previous = self.rows.pop(row_key, None)
        previous_size = self._sizes.pop(row_key, 0)
        self._size -= previous_size
        if headers["operation"] == "delete":
            return None
        value = message["value"]
        size = len(raw)
        if previous is not None and isinstance(value, dict):
            before = previous.get("value")
            if isinstance(before, dict):
                message = {**message, "value": {**before, **value}}
                # An estimate, not a serialization per change: fields added grow the row by
                # about the change; fields rewritten leave it about the larger of the two.
                grows = not value.keys() <= before.keys()
                size = previous_size + size if grows else max(previous_size, size)
        self.rows[row_key] = message
        self._sizes[row_key] = size
        self._size += size
        if self.limit is not None and self._size > self.limit:
            return Refusal(index, f"the state passed {self.limit} bytes", too_large=True)
        return None

    def fold(self, history: Iterable[bytes]) -> Refusal | None:
        for raw in history:
            refusal = self.apply(raw)
            if refusal is not None:
                return refusal
        return None

    def snapshot(self) -> tuple[bytes, ...]:
        """The snapshot of the rows: `snapshot-start`, one insert per row, `snapshot-end`."""
        inserts = (_encode(_as_insert(message)) for message in self.rows.values())
        return (
            _encode({"headers": {"control": "snapshot-start"}}),
            *inserts,
            _encode({"headers": {"control": "snapshot-end"}}),
        )

    def state(self) -> dict[tuple[str, str], Any]:
        """Each row's value (what a reader materializes)."""
        return {row_key: message.get("value") for row_key, message in self.rows.items()}


def _check(message: Any, index: int) -> Refusal | None:
    if not isinstance(message, dict):
        return Refusal(index, "not a JSON object")
    headers = message.get("headers")
    if not isinstance(headers, dict):
        return Refusal(index, "no headers object: not a State Protocol message")
    control = headers.get("control")
    if control is not None:
        if control not in CONTROLS:
            # Named by its index only: the reason is shown to who may `operate`, not `read`.
            return Refusal(index, "an unknown control message")
        return None
    operation = headers.get("operation")
    if operation not in OPERATIONS:
        return Refusal(index, "neither a change nor a control message")
    if not isinstance(message.get("type"), str) or not isinstance(message.get("key"), str):
        return Refusal(index, "a change message needs a string type and key")
    if operation != "delete" and "value" not in message:
        return Refusal(index, f"an {operation} needs a value")
    return None


def _as_insert(message: dict[str, Any]) -> dict[str, Any]:
    """The row's latest change as an insert: its headers (txid, timestamp...) kept, the
    operation made insert, the previous value dropped."""
    headers = {**message["headers"], "operation": "insert"}
    row = {name: value for name, value in message.items() if name != "old_value"}
    return {**row, "headers": headers}


class _NotPortable(ValueError):
    """A value a snapshot could not carry as the history did."""


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotPortable("a number out of range: a snapshot could not carry it")
    return number


def _no_constant(text: str) -> float:
    raise _NotPortable(f"{text} is not JSON")


def _encode(message: dict[str, Any]) -> bytes:
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate, written escaped as the history had it
        return json.dumps(message, separators=(",", ":")).encode()


def fold_state(history: Iterable[bytes]) -> tuple[StateFold, Refusal | None]:
    """Fold a whole history (for tests and tools): the fold, and a Refusal if it stopped."""
    fold = StateFold()
    return fold, fold.fold(history)
