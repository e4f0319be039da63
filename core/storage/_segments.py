"""The layout of a sealed segment: one S3 object holding a run of a stream's bytes, in pages.

A page holds whole units only: messages for JSON streams, appends for others. A JSON page starts
with a header, the packed lengths of its messages, followed by their bytes. The object of any
other stream starts with exactly the stream's bytes, so any range of positions is one ranged
GET (and readers of earlier versions, which read such objects as bare bytes, read them right);
the lengths of its appends follow all the bytes, page after page, in a trailer, so a reader can
tell where an append began when it must (a read at an offset inside one starts at its start).
The page directory (where each page starts, in stream positions, and how many units it holds,
with `IN_TRAILER` set when their lengths are in the trailer) is small and lives in the segment's
DynamoDB item, so a reader knows which object bytes to ask for before asking.

Segments of other streams sealed before appends were recorded have pages cut by size anywhere,
with a count of 0: where their appends began is not known. Pieces read back from such pages say
so (`Piece.lengths` None) and are sealed again the same way.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, pairwise

from . import _items as items

_ENTRY = struct.Struct("<QI")  # page start position, unit count (| IN_TRAILER)
LENGTH_BYTES = 4  # one packed unit length
IN_TRAILER = 1 << 31  # the page's unit lengths are in the object's trailer, not a header
_COUNT = IN_TRAILER - 1


@dataclass(frozen=True)
class Page:
    position: int  # stream position of its first byte
    end: int  # stream position after its last byte
    count: int  # units: messages (JSON), appends (0: not known)
    offset: int  # object offset of its header (of its bytes, when there is no header)
    lengths_at: int | None = None  # object offset of its units' lengths in the trailer

    @property
    def header(self) -> bool:
        return self.lengths_at is None and self.count > 0

    @property
    def data_offset(self) -> int:
        return self.offset + LENGTH_BYTES * self.count if self.header else self.offset

    @property
    def object_end(self) -> int:
        return self.data_offset + self.end - self.position

    def served_size(self, lo: int, hi: int) -> int:
        """At most what the part of this page within [lo, hi) costs in a JSON response:
        its bytes and one separator per message."""
        return max(0, min(self.end, hi) - max(self.position, lo)) + self.count


@dataclass(frozen=True)
class Piece:
    """Consecutive stream bytes to seal, with the lengths of their units (messages for JSON,
    appends otherwise); None for bytes whose appends are not known."""

    data: bytes
    lengths: tuple[int, ...] | None = None


@dataclass(frozen=True)
class SegmentBody:
    body: bytes
    directory: bytes


class SegmentBuilder:
    """Lays out a segment as its bytes arrive, piece after piece. A page is cut before the
    message that would take it past `page_bytes` (counted as a JSON response counts it:
    bytes plus one separator per message), so every page fits a read of that size; a
    message larger than that is a page of its own."""

    def __init__(self, start: int, json_mode: bool, page_bytes: int) -> None:
        self.start = start
        self.json_mode = json_mode
        self.page_bytes = page_bytes
        self.position = start
        self._body = bytearray()
        self._directory = bytearray()
        self._page_start = start
        self._page_data = bytearray()
        self._page_lengths: list[int] = []
        self._trailer = bytearray()  # the appends' lengths of a stream that is not JSON

    @property
    def size(self) -> int:
        """Stream bytes taken so far."""
        return self.position - self.start

    @property
    def open_page_fill(self) -> int:
        """What the page being filled would cost a reader (0: the last page is complete)."""
        return len(self._page_data) + len(self._page_lengths)

    def add(self, piece: Piece) -> None:
        if piece.lengths is None and not self.json_mode:
            self._add_unknown(piece.data)
            return
        if self._page_data and not self._page_lengths:
            self._close_page()  # a page holds units or bytes of unknown appends, not both
        cursor = 0
        for length in piece.lengths or ():
            if self._page_data and self.open_page_fill + length + 1 > self.page_bytes:
                self._close_page()
            self._page_data.extend(piece.data[cursor : cursor + length])
            self._page_lengths.append(length)
            cursor += length
            self.position += length

    def _add_unknown(self, data: bytes) -> None:
        if self._page_lengths:
            self._close_page()
        view = memoryview(data)
        while view:
            taken = view[: self.page_bytes - len(self._page_data)]
            self._page_data.extend(taken)
            self.position += len(taken)
            view = view[len(taken) :]
            if len(self._page_data) >= self.page_bytes:
                self._close_page()

    def finish(self) -> SegmentBody:
        self._close_page()
        return SegmentBody(bytes(self._body + self._trailer), bytes(self._directory))

    def _close_page(self) -> None:
        if not self._page_data and not self._page_lengths:
            return
        count = len(self._page_lengths)
        lengths = items.pack_lengths(tuple(self._page_lengths))
        if self.json_mode:
            self._directory.extend(_ENTRY.pack(self._page_start, count))
            self._body.extend(lengths)
        else:
            flagged = count | IN_TRAILER if count else 0
            self._directory.extend(_ENTRY.pack(self._page_start, flagged))
            self._trailer.extend(lengths)
        self._body.extend(self._page_data)
        self._page_start = self.position
        self._page_data.clear()
        self._page_lengths.clear()


def build(start: int, pieces: Iterable[Piece], json_mode: bool, page_bytes: int) -> SegmentBody:
    """The object and directory for the bytes of `pieces`, which begin at position `start`."""
    builder = SegmentBuilder(start, json_mode, page_bytes)
    for piece in pieces:
        builder.add(piece)
    return builder.finish()


def pages(directory: bytes, end: int) -> tuple[Page, ...]:
    """The pages a directory describes, for a segment ending at stream position `end`."""
    entries = [_ENTRY.unpack_from(directory, i) for i in range(0, len(directory), _ENTRY.size)]
    found: list[Page] = []
    offset = 0
    for index, (position, flagged) in enumerate(entries):
        page_end = entries[index + 1][0] if index + 1 < len(entries) else end
        trailer = bool(flagged & IN_TRAILER)
        page = Page(position, page_end, flagged & _COUNT, offset, 0 if trailer else None)
        found.append(page)
        offset = page.object_end
    # The trailer follows the bytes: each page's lengths after the previous page's.
    at = offset
    for index, page in enumerate(found):
        if page.lengths_at is not None:
            found[index] = replace(page, lengths_at=at)
            at += LENGTH_BYTES * page.count
    return tuple(found)


def page_at(directory: Sequence[Page], position: int) -> int:
    """The index of the page holding `position` (the first page when it lies before them)."""
    starts = [page.position for page in directory]
    return max(0, bisect.bisect_right(starts, position) - 1)


def messages_of(page: Page, raw: bytes) -> list[tuple[int, bytes]]:
    """(start position, bytes) of each unit of a page, from the object bytes of the whole page
    (header first)."""
    header = LENGTH_BYTES * page.count
    lengths = items.unpack_lengths(raw[:header])
    starts = accumulate(lengths, initial=page.position)
    return list(zip(starts, cut(raw, lengths, header), strict=False))


def page_messages(page: Page, raw: bytes) -> list[bytes]:
    """The units of a page, from the object bytes of the whole page (header first)."""
    header = LENGTH_BYTES * page.count
    return cut(raw, items.unpack_lengths(raw[:header]), header)


def cut(data: bytes, lengths: Iterable[int], at: int = 0) -> list[bytes]:
    """`data` cut into consecutive pieces of these lengths, the first beginning at `at`."""
    return [data[a:b] for a, b in pairwise(accumulate(lengths, initial=at))]


def pieces_of(directory: Sequence[Page], raw: bytes, json_mode: bool) -> list[Piece]:
    """A whole segment object read back as pieces (to seal it again into a larger one)."""
    found = []
    for page in directory:
        data = raw[page.data_offset : page.object_end]
        if page.header:
            found.append(Piece(data, items.unpack_lengths(raw[page.offset : page.data_offset])))
        elif page.lengths_at is not None:
            at = page.lengths_at
            lengths = items.unpack_lengths(raw[at : at + LENGTH_BYTES * page.count])
            found.append(Piece(data, lengths))
        else:
            found.append(Piece(data))
    return found
