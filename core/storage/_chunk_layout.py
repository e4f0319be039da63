"""What a chunk item says and where the objects it names live: the layout that the read path
(`_chunks`), the sealer, the collector and the segment cache all rely on.

An item `d#<inc> / c#<end>` (`_items`) holds one committed chunk of positions [start, end):
its bytes inline or in an S3 object, and for JSON the lengths of its messages; a void chunk
(a reserved range that holds nothing); or a sealed segment, an S3 object laid out in pages
(`_segments`) that replaced the chunks of [start, end). Every object of an incarnation lies
under `data/<inc>/`, so the collector removes them together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _items as items
from . import _segments as layout

DATA_ROOT = "data/"


@dataclass(frozen=True)
class Chunk:
    start: int
    end: int
    inline: bytes | None
    s3_key: str | None
    lengths: tuple[int, ...] | None
    lengths_key: str | None
    # Set for a sealed segment: its object's page directory.
    pages: tuple[layout.Page, ...] | None = None
    # A void chunk: a reserved range that holds no data, ever (`core.storage._ranges`).
    void: bool = False
    number: int = 0  # its range number (0: written before ranges were numbered)

    @property
    def sealed(self) -> bool:
        return self.pages is not None


class ObjectGone(Exception):
    """An object a chunk or segment item named was removed after the item was read: the run
    it held was sealed into a segment (or merged into a larger one) and the collector took
    the old object. Reading again finds the items that replaced it."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def data_prefix(incarnation: str) -> str:
    """Where the S3 objects of one incarnation live; the collector removes them together."""
    return f"{DATA_ROOT}{incarnation}/"


def incarnation_of(key: str) -> str:
    """The incarnation whose prefix an object lies under."""
    return key[len(DATA_ROOT) :].split("/", 1)[0]


def decode_chunk(item: dict[str, Any]) -> Chunk:
    end = int(item["sk"]["S"][2:])
    packed = item.get("ml", {}).get("B")
    return Chunk(
        start=int(item["st"]["N"]),
        end=end,
        inline=bytes(item["b"]["B"]) if "b" in item else None,
        s3_key=item["k"]["S"] if "k" in item else None,
        lengths=items.unpack_lengths(bytes(packed)) if packed is not None else None,
        lengths_key=item["mk"]["S"] if "mk" in item else None,
        pages=layout.pages(bytes(item["pg"]["B"]), end) if "pg" in item else None,
        void=bool(item.get("v", {}).get("BOOL", False)),
        number=int(item["n"]["N"]) if "n" in item else 0,
    )
