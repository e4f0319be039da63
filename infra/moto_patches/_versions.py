"""Which moto versions the patches were tested with: a range of release numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass

_RELEASE = re.compile(r"[0-9]+(?:\.[0-9]+)*")


def release(version: str) -> tuple[int, ...]:
    """The release numbers a version starts with: "5.2.1" and "5.2.1.dev3" give (5, 2, 1).
    A version that starts with none gives (), which no range holds."""
    found = _RELEASE.match(version.strip())
    return tuple(int(part) for part in found.group().split(".")) if found else ()


@dataclass(frozen=True)
class VersionRange:
    """The versions from `lowest` (included) up to `below` (excluded), by release numbers, so
    that 5.2 and 5.2.0 are the same version."""

    lowest: tuple[int, ...]
    below: tuple[int, ...]

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, str):
            return False
        number = _padded(release(version), self)
        return bool(number) and _padded(self.lowest, self) <= number < _padded(self.below, self)

    def __str__(self) -> str:
        return f">={_dotted(self.lowest)},<{_dotted(self.below)}"


def _padded(number: tuple[int, ...], bounds: VersionRange) -> tuple[int, ...]:
    if not number:
        return ()
    width = max(len(number), len(bounds.lowest), len(bounds.below))
    return number + (0,) * (width - len(number))


def _dotted(number: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in number)
