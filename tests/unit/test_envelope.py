"""The front-door size model and the cutting of reads to fit it.

`encoded_size` is checked against what really leaves the function: Mangum's own body encoding
followed by JSON serialisation of the string.
"""

from __future__ import annotations

import json
import random

import pytest
from mangum.adapter import DEFAULT_TEXT_MIME_TYPES
from mangum.handlers.utils import handle_base64_response_body

from durable_streams_aws.core.http.envelope import (
    TEXT_MIME_TYPES,
    encoded_size,
    encoded_size_bound,
    fit_read,
    largest_fitting,
    text_boundary,
)
from durable_streams_aws.core.http.responses import read_body
from durable_streams_aws.core.protocol.sse import data_event
from durable_streams_aws.core.storage import ReadBatch

SAMPLES = [
    b"",
    b"plain ascii",
    b'quotes " and \\ backslashes',
    b"line\nbreaks\r\nand\rreturns\ttabs",
    b"\x00\x01\x1f control characters",
    "accents \u00e9\u00e8, CJK \u65e5\u672c\u8a9e, emoji \U0001f600".encode(),
    b"\xff\xfe not UTF-8 at all",
    "\u65e5".encode()[:2],  # a character cut short
    bytes(range(256)),
]
CONTENT_TYPES = [
    "text/plain",
    "text/plain; charset=utf-8",
    "application/json",
    "APPLICATION/JSON",  # Mangum's test is case-sensitive: this one goes out as base64
    "application/octet-stream",
    "text/event-stream",
    "image/png",
]


def lambda_payload_size(body: bytes, content_type: str) -> int:
    encoded, _ = handle_base64_response_body(body, {"content-type": content_type}, TEXT_MIME_TYPES)
    return len(json.dumps(encoded)) - 2


def test_our_text_types_are_manguns() -> None:
    assert TEXT_MIME_TYPES == DEFAULT_TEXT_MIME_TYPES


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("body", SAMPLES)
def test_encoded_size_is_what_mangum_and_json_produce(body: bytes, content_type: str) -> None:
    assert encoded_size(body, content_type) == lambda_payload_size(body, content_type)


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("body", [*SAMPLES, b"\x00" * 9, "\U0001f600".encode() * 3, b"\xff" * 5])
def test_the_bound_is_never_below_the_encoded_size(body: bytes, content_type: str) -> None:
    assert encoded_size(body, content_type) <= encoded_size_bound(len(body), content_type)


def test_a_read_that_fits_only_once_weighed_is_still_served_whole() -> None:
    """Below the bound a body is weighed: one that fits exactly is served whole, one byte less
    of budget cuts it."""
    messages = tuple(b'{"n":%d}' % i for i in range(50))
    batch = ReadBatch(0, sum(map(len, messages)), messages=messages)
    exact = encoded_size(read_body(batch), "application/json")
    assert encoded_size_bound(len(read_body(batch)), "application/json") > exact
    whole, body = fit_read(batch, _render_json, "application/json", exact, text=True)
    assert whole.messages == messages and body == read_body(batch)
    cut, _ = fit_read(batch, _render_json, "application/json", exact - 1, text=True)
    assert len(cut.messages or ()) == 49


def test_encoded_size_matches_on_random_bodies() -> None:
    rng = random.Random(5)
    alphabet = ["a", "\n", '"', "\\", "\u00e9", "\u65e5", "\U0001f600", "\x07", "\r\n"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
        body = text.encode()
        if rng.random() < 0.2 and body:
            body = body[: rng.randrange(len(body))]  # possibly cut inside a character
        for content_type in ("text/plain", "application/octet-stream", "text/event-stream"):
            assert encoded_size(body, content_type) == lambda_payload_size(body, content_type)
            assert encoded_size(body, content_type) <= encoded_size_bound(len(body), content_type)


def test_encoded_size_counts_every_character_as_json_escapes_it() -> None:
    """Every Unicode scalar value, alone and between ASCII, weighs what `json.dumps` writes
    for it (the size is counted by byte class, not by encoding)."""
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            continue  # surrogates are not characters: no valid UTF-8 holds them
        text = chr(code)
        for body in (text, f"a{text}b{text}"):
            expected = len(json.dumps(body)) - 2
            assert encoded_size(body.encode(), "text/plain") == expected, hex(code)


MIXED = "a\u00e9\u65e5\U0001f600\r\nb\rc\n".encode() * 3


@pytest.mark.parametrize("cut", range(len(MIXED) + 1))
def test_text_boundary_never_splits_a_character_or_a_crlf(cut: int) -> None:
    moved = text_boundary(MIXED, cut)
    assert moved <= cut and cut - moved <= 3
    if cut > 0:
        assert moved > 0, "a reader must always make progress"
    MIXED[:moved].decode("utf-8")  # whole characters only
    assert not (0 < moved < len(MIXED) and MIXED[moved - 1 : moved + 1] == b"\r\n")


def test_text_boundary_leaves_bytes_that_are_not_utf8_alone() -> None:
    junk = b"\x80\x80\x80\x80\x80\x80"
    assert [text_boundary(junk, cut) for cut in range(7)] == list(range(7))
    assert text_boundary("\u65e5".encode(), 2) == 2  # nothing before it: progress wins


def test_largest_fitting_agrees_with_a_linear_search() -> None:
    rng = random.Random(9)
    for _ in range(200):
        steps = [rng.choice([1, 1, 2, 6, 12]) for _ in range(rng.randrange(1, 400))]
        totals = [0]
        for step in steps:
            totals.append(totals[-1] + step)
        budget = rng.randrange(0, totals[-1] + 10)
        weighings: list[int] = []

        def weigh(n: int, totals: list[int] = totals, seen: list[int] = weighings) -> int:
            seen.append(n)
            return totals[n]

        expected = max(n for n, total in enumerate(totals) if total <= budget)
        assert largest_fitting(len(steps), weigh, budget) == expected
        assert len(weighings) <= 2 * len(steps).bit_length() + 2


def _render_json(batch: ReadBatch) -> bytes:
    return read_body(batch)


def test_json_reads_are_cut_between_messages_and_always_carry_one() -> None:
    messages = tuple(b'"\\u00e9\\"%d"' % i for i in range(200))
    batch = ReadBatch(0, sum(map(len, messages)), messages=messages)
    budget = 500
    fitted, body = fit_read(batch, _render_json, "application/json", budget, text=True)
    assert 0 < len(fitted.messages) < 200  # type: ignore[arg-type]
    assert body == read_body(fitted)
    assert encoded_size(read_body(fitted), "application/json") <= budget
    one_more = batch.head(len(fitted.messages) + 1)  # type: ignore[arg-type]
    assert encoded_size(read_body(one_more), "application/json") > budget
    assert fitted.end == sum(map(len, fitted.messages))  # type: ignore[arg-type]
    lonely, _ = fit_read(batch, _render_json, "application/json", 1, text=True)
    assert lonely.messages == messages[:1]


def test_sse_text_events_are_cut_on_characters_and_fit() -> None:
    data = ("\u65e5\u672c\n" * 2000).encode()
    batch = ReadBatch(100, 100 + len(data), data=data)

    def render(part: ReadBatch) -> bytes:
        return data_event(part.data, "text/plain")

    for budget in (1000, 5000, 20000):
        fitted, event = fit_read(batch, render, "text/event-stream", budget, text=True)
        assert event == render(fitted)
        assert 0 < len(fitted.data) < len(data)
        assert fitted.end == 100 + len(fitted.data)
        fitted.data.decode("utf-8")
        assert encoded_size(render(fitted), "text/event-stream") <= budget


def test_binary_reads_fit_after_base64() -> None:
    data = bytes(random.Random(3).randrange(256) for _ in range(3000))
    batch = ReadBatch(0, len(data), data=data)
    fitted, _ = fit_read(batch, read_body, "application/octet-stream", 1000, text=False)
    assert len(fitted.data) == 750  # 1000 base64 characters carry 750 bytes
    whole, _ = fit_read(batch, read_body, "application/octet-stream", 10_000, text=False)
    assert whole is batch


def test_cutting_a_batch_read_from_inside_a_message_keeps_its_end_right() -> None:
    """A JSON read from an offset inside a message starts at the next message: the cut's end
    is where its last message ends, not its start plus the messages' lengths."""
    batch = ReadBatch(2, 10, messages=(b"333", b"4444"))  # "333" is 3-6, "4444" is 6-10
    assert batch.head(1).end == 6
    assert batch.head(2) is batch
