"""The sealed segment layout: pages of whole messages, a directory that locates them."""

from __future__ import annotations

import random

import pytest

from durable_streams_aws.core.storage import _segments as layout


def json_pieces(rng: random.Random, count: int) -> tuple[list[layout.Piece], list[bytes]]:
    messages = [
        b'{"n":%d,"pad":"%s"}' % (i, b"x" * rng.choice([0, 3, 40, 300])) for i in range(count)
    ]
    pieces, index = [], 0
    while index < len(messages):
        run = messages[index : index + rng.randint(1, 7)]
        pieces.append(layout.Piece(b"".join(run), tuple(map(len, run))))
        index += len(run)
    return pieces, messages


@pytest.mark.parametrize("seed", range(20))
def test_json_pages_hold_every_message_once_in_order_and_fit_their_size(seed: int) -> None:
    rng = random.Random(seed)
    pieces, messages = json_pieces(rng, rng.randint(1, 200))
    start = rng.choice([0, 17, 10_000])
    page_bytes = rng.choice([64, 200, 1000, 5000])
    built = layout.build(start, pieces, json_mode=True, page_bytes=page_bytes)
    end = start + sum(map(len, messages))
    directory = layout.pages(built.directory, end)
    assert directory[0].position == start and directory[-1].end == end
    assert directory[-1].object_end == len(built.body)
    found = []
    for page in directory:
        raw = built.body[page.offset : page.object_end]
        in_page = layout.messages_of(page, raw)
        assert len(in_page) == page.count >= 1
        assert layout.page_messages(page, raw) == [m for _, m in in_page]
        # A page fits a response of page_bytes, unless it is one message larger than that.
        assert page.served_size(page.position, page.end) <= page_bytes or page.count == 1
        found.extend(in_page)
    assert [m for _, m in found] == messages
    positions = [p for p, _ in found]
    assert positions == [start + sum(map(len, messages[:i])) for i in range(len(messages))]
    assert b"".join(p.data for p in layout.pieces_of(directory, built.body, True)) == b"".join(
        messages
    )


@pytest.mark.parametrize("seed", range(10))
def test_cut_gives_consecutive_pieces_of_the_lengths(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.choice([0, 1, 5, 90]) for _ in range(rng.randint(0, 40))]
    at = rng.randint(0, 9)
    data = bytes(rng.randrange(256) for _ in range(at + sum(lengths) + rng.randint(0, 3)))
    expected, cursor = [], at
    for length in lengths:
        expected.append(data[cursor : cursor + length])
        cursor += length
    assert layout.cut(data, lengths, at) == expected


def test_binary_segments_are_the_bytes_themselves_with_pages_for_splitting() -> None:
    data = bytes(range(256)) * 50
    built = layout.build(1000, [layout.Piece(data[:77]), layout.Piece(data[77:])], False, 4096)
    assert built.body == data
    directory = layout.pages(built.directory, 1000 + len(data))
    assert [p.position for p in directory] == [1000, 5096, 9192, 13288]
    assert all(p.count == 0 and p.offset == p.position - 1000 for p in directory)


@pytest.mark.parametrize(
    ("position", "index"), [(0, 0), (99, 0), (100, 1), (150, 1), (200, 2), (10**9, 2)]
)
def test_page_at_finds_the_page_holding_a_position(position: int, index: int) -> None:
    directory = [
        layout.Page(0, 100, 1, 0),
        layout.Page(100, 200, 1, 104),
        layout.Page(200, 300, 1, 208),
    ]
    assert layout.page_at(directory, position) == index
