"""How far a micro-batch may read: pure decisions over the rows pending in each stream.

Offsets are checkpointed as canonical JSON (Spark compares them as strings): one entry per
stream, keys sorted, the beginning spelt as this server's first offset rather than "-1", so
that an empty stream's start and tail are the same string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ._plan import FIRST


def canonical(offsets: Mapping[str, str]) -> dict[str, str]:
    return {
        stream: FIRST if offsets[stream] == "-1" else offsets[stream] for stream in sorted(offsets)
    }


@dataclass(frozen=True)
class Budget:
    """What one micro-batch may take: rows and bytes of messages, None for no limit."""

    rows: int | None = None
    bytes: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.rows is None and self.bytes is None

    def shares(self, streams: int) -> list[Budget]:
        """The budget split between `streams` streams (the first ones get the remainder; every
        stream may take at least one row, so that a batch always moves on)."""

        def split(total: int | None, index: int) -> int | None:
            if total is None:
                return None
            return max(1, total // streams + (1 if index < total % streams else 0))

        return [Budget(split(self.rows, i), split(self.bytes, i)) for i in range(streams)]


def admitted_end(start: str, rows: Iterable[tuple[str, int]], budget: Budget) -> str:
    """The offset a micro-batch reads one stream to: after as many of its pending rows (each
    given as its end offset and its size) as the budget allows, at least one."""
    end, taken_rows, taken_bytes = start, 0, 0
    for offset, size in rows:
        over_rows = budget.rows is not None and taken_rows + 1 > budget.rows
        over_bytes = budget.bytes is not None and taken_bytes + size > budget.bytes
        if taken_rows and (over_rows or over_bytes):
            break
        end, taken_rows, taken_bytes = offset, taken_rows + 1, taken_bytes + size
    return end
