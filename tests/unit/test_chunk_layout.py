"""The chunk item layout: what the read path, the sealer and the collector decode from a chunk
item, and where an incarnation's objects live."""

from __future__ import annotations

from durable_streams_aws.core.storage import _items as items
from durable_streams_aws.core.storage import _segments as layout
from durable_streams_aws.core.storage._chunk_layout import (
    DATA_ROOT,
    Chunk,
    data_prefix,
    decode_chunk,
    incarnation_of,
)
from durable_streams_aws.core.storage._chunks import ChunkStore, StoredBody
from durable_streams_aws.core.storage.model import Payload

INCARNATION = "0123abcd"


def committed(start: int, payload: Payload, body: StoredBody, number: int = 0) -> Chunk:
    """The chunk a reader decodes from the item a commit writes."""
    store = ChunkStore(None, None, "table", "bucket", inline_max_bytes=64 * 1024)
    return decode_chunk(store.chunk_put(INCARNATION, start, payload, body, number)["Item"])


def test_an_inline_chunk_reads_back_its_bytes_lengths_and_range_number() -> None:
    lengths = (3, 5)
    body = StoredBody(INCARNATION, inline=b"abcdefgh", lengths=items.pack_lengths(lengths))
    chunk = committed(100, Payload(b"abcdefgh", lengths), body, number=7)
    assert chunk == Chunk(100, 108, b"abcdefgh", None, lengths, None, number=7)
    assert not chunk.sealed and not chunk.void


def test_a_chunk_in_s3_names_its_object_and_its_lengths_object() -> None:
    key = f"{data_prefix(INCARNATION)}f00"
    body = StoredBody(INCARNATION, s3_key=key, lengths_key=f"{key}.idx")
    chunk = committed(0, Payload(b"x" * 10), body)
    assert chunk == Chunk(0, 10, None, key, None, f"{key}.idx")


def test_a_void_chunk_holds_nothing() -> None:
    item = {**items.chunk_key(INCARNATION, 50), "st": items.n(20), "v": {"BOOL": True}}
    chunk = decode_chunk(item)
    assert (chunk.start, chunk.end, chunk.void, chunk.inline, chunk.s3_key) == (
        20,
        50,
        True,
        None,
        None,
    )


def test_a_sealed_segment_carries_its_page_directory() -> None:
    pieces = [layout.Piece(b'{"a":1}{"b":2}', (7, 7)), layout.Piece(b'{"c":3}', (7,))]
    built = layout.build(40, pieces, json_mode=True, page_bytes=16)
    key = f"{data_prefix(INCARNATION)}seg-1"
    item = {
        **items.chunk_key(INCARNATION, 61),
        "st": items.n(40),
        "k": items.s(key),
        "pg": {"B": built.directory},
    }
    chunk = decode_chunk(item)
    assert chunk.sealed and chunk.s3_key == key
    assert chunk.pages == layout.pages(built.directory, 61)
    assert chunk.pages[0].position == 40 and chunk.pages[-1].end == 61


def test_every_object_of_an_incarnation_lies_under_its_prefix() -> None:
    prefix = data_prefix(INCARNATION)
    assert prefix.startswith(DATA_ROOT) and prefix.endswith("/")
    for key in (f"{prefix}abc", f"{prefix}abc.idx", f"{prefix}seg-0-10-ff"):
        assert incarnation_of(key) == INCARNATION
