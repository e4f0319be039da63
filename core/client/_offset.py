"""Offsets as a type of their own: callers compare offsets, never raw strings."""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering
from typing import ClassVar

_BEGINNING = "-1"
_NOW = "now"
_FORBIDDEN = set(",&=?/")


@total_ordering
@dataclass(frozen=True)
class Offset:
    """A position in one stream, as the server named it. Tokens are opaque but ordered: the
    protocol promises that a later position has a lexicographically greater token. The two
    sentinels are `Offset.BEGINNING` (before everything) and `Offset.NOW` (the tail at the
    time of a request, which has no place in the order)."""

    token: str

    BEGINNING: ClassVar[Offset]
    NOW: ClassVar[Offset]

    def __post_init__(self) -> None:
        if not self.token or len(self.token) > 1024 or _FORBIDDEN & set(self.token):
            raise ValueError(f"not an offset: {self.token!r}")

    @property
    def is_beginning(self) -> bool:
        return self.token == _BEGINNING

    @property
    def is_now(self) -> bool:
        return self.token == _NOW

    def _rank(self) -> tuple[int, str]:
        if self.is_now:
            raise TypeError("Offset.NOW is the tail at request time: it has no order")
        return (0, "") if self.is_beginning else (1, self.token)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Offset):
            return NotImplemented
        return self._rank() < other._rank()

    def __str__(self) -> str:
        return self.token


Offset.BEGINNING = Offset(_BEGINNING)
Offset.NOW = Offset(_NOW)
