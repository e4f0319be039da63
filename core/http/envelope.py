"""What a response body weighs at the front door, and how much of a read fits in one response.

Inside Lambda a buffered response leaves as JSON: Mangum puts the body in a JSON string, as
text when the content type is textual and the body is valid UTF-8, as base64 otherwise, and the
runtime serialises that string with JSON escapes (counted here as `ensure_ascii` does, every
non-ASCII character as a `\\uXXXX` escape: the most it can cost). A Function URL refuses a
payload over 6 MB with a 502. The raw size of a read says little about that: an SSE event
prefixes each line with `data:`, a JSON read adds separators, text can triple under escaping,
binary grows by a third. So every response body is measured in its encoded form and each read
is cut to fit. Under uvicorn the same budget applies, so both hosts serve the same ranges.

Cuts keep bodies valid: whole messages for JSON, and for text never inside a UTF-8 character
(nor between a CR and its LF, which SSE framing would turn into two line breaks).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..protocol.jsonmode import join_messages
from ..storage import ReadBatch

# Mangum's text types: the API function hands this list to Mangum, so the two never disagree.
TEXT_MIME_TYPES = [
    "text/",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/vnd.api+json",
    "application/vnd.oai.openapi",
]
# Room left in an SSE response for its control events and event framing.
SSE_CONTROL_ALLOWANCE = 2048
_CR, _LF = 0x0D, 0x0A


def is_text(content_type: str) -> bool:
    """Whether Mangum would try to send a body of this type as text (its own test)."""
    return any(marker in content_type for marker in TEXT_MIME_TYPES)


def encoded_size(body: bytes, content_type: str) -> int:
    """The size of `body` once it is a JSON string in the Lambda response."""
    if is_text(content_type):
        try:
            if not body.isascii():  # ASCII is UTF-8, and checked faster
                body.decode("utf-8")
        except UnicodeDecodeError:
            pass  # not UTF-8: sent as base64
        else:
            return _escaped_size(body)
    return 4 * ((len(body) + 2) // 3)


def _escape_weights() -> tuple[bytes, dict[int, bytes]]:
    """What `json.dumps` (`ensure_ascii`) writes for each byte of valid UTF-8: one character
    for most ASCII, its escape for the rest; a character of two or three bytes is one
    `\\uXXXX` (its lead byte weighs 6, the bytes after it 0), one of four bytes a surrogate
    pair (12). Returned as the bytes weighing one character each, and for every other weight
    the bytes to delete to keep only the bytes of that weight."""
    weight = {byte: len(json.dumps(chr(byte))) - 2 for byte in range(0x80)}
    weight |= {byte: 0 for byte in range(0x80, 0xC0)}
    weight |= {byte: 6 for byte in range(0xC0, 0xF0)}
    weight |= {byte: 12 for byte in range(0xF0, 0x100)}
    plain = bytes(byte for byte in range(0x100) if weight[byte] == 1)
    classes = {
        chars: bytes(byte for byte in range(0x100) if weight[byte] != chars)
        for chars in set(weight.values()) - {1}
    }
    return plain, classes


_PLAIN_BYTES, _ESCAPE_CLASSES = _escape_weights()


def _escaped_size(body: bytes) -> int:
    """What `json.dumps` writes for valid UTF-8 `body` decoded, quotes aside, counted by
    byte class in C (`bytes.translate`) rather than by encoding it: measuring a read of many
    megabytes so was a third of the server's work serving it. The bytes that weigh one
    character are dropped first, so the other classes are counted in what is left."""
    rest = body.translate(None, _PLAIN_BYTES)
    size = len(body) - len(rest)
    if rest.isascii():  # ASCII escapes only: two characters (`\\n`) or six (`\\u0001`)
        short = len(rest.translate(None, _ESCAPE_CLASSES[2]))
        return size + 2 * short + 6 * (len(rest) - short)
    for chars, others in _ESCAPE_CLASSES.items():
        size += chars * len(rest.translate(None, others))
    return size


def encoded_size_bound(size: int, content_type: str) -> int:
    """The most a body of `size` bytes can take once encoded (`encoded_size` at worst): JSON
    escapes at most six characters per byte (a control character as `\\u00XX`; a character
    of 2 to 4 bytes as one or two such escapes); base64 takes four per three."""
    return 6 * size if is_text(content_type) else 4 * ((size + 2) // 3)


def fits_one_response(messages: tuple[bytes, ...], max_response_bytes: int) -> bool:
    """Whether these JSON messages fit one response once encoded for the front door, with
    room for SSE framing and control events (a compacted stream's snapshot is served whole,
    as a read's body or as one SSE data event)."""
    body = join_messages(list(messages))
    return encoded_size(body, "application/json") + SSE_CONTROL_ALLOWANCE <= max_response_bytes


def text_boundary(data: bytes, cut: int) -> int:
    """`cut`, moved back so that it splits neither a UTF-8 character nor a CR LF pair. Never
    moved to zero (a reader must always make progress); bytes that are not UTF-8 are cut
    where asked."""
    lead = cut - 1
    while lead > 0 and cut - lead < 4 and 0x80 <= data[lead] < 0xC0:
        lead -= 1
    if lead > 0 and lead + _sequence_width(data[lead]) > cut:
        cut = lead
    if 1 < cut < len(data) and data[cut - 1] == _CR and data[cut] == _LF:
        cut -= 1
    return cut


def _sequence_width(lead: int) -> int:
    """Bytes in the UTF-8 sequence this byte starts (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead < 0xE0:
        return 2
    if 0xE0 <= lead < 0xF0:
        return 3
    if 0xF0 <= lead < 0xF5:
        return 4
    return 0


def largest_fitting(count: int, weigh: Callable[[int], int], budget: int) -> int:
    """The largest n in [0, count] with weigh(n) <= budget, for a weight that grows with n.
    The first probe is interpolated (weights are nearly proportional), then the interval is
    halved, so even a large read costs a few dozen weighings at worst."""
    high_weight = weigh(count)
    if high_weight <= budget:
        return count
    low, high, low_weight = 0, count, 0
    interpolate = True
    while high - low > 1:
        if interpolate and high_weight > low_weight:
            guess = low + (budget - low_weight) * (high - low) // (high_weight - low_weight)
        else:
            guess = (low + high) // 2
        middle = min(max(guess, low + 1), high - 1)
        weight = weigh(middle)
        if weight <= budget:
            low, low_weight = middle, weight
        else:
            high, high_weight = middle, weight
        interpolate = not interpolate
    return low


def fit_read(
    batch: ReadBatch,
    render: Callable[[ReadBatch], bytes],
    wire_type: str,
    budget: int,
    text: bool,
) -> tuple[ReadBatch, bytes]:
    """The longest prefix of `batch` whose rendered body fits `budget` once encoded as
    `wire_type`, with that body: whole messages for JSON (at least one), whole appends for
    other streams unless the first alone does not fit, and then for text (`text`) a cut that
    splits no character. A prefix is never empty while the batch has data."""
    json_mode = batch.messages is not None
    count = len(batch.messages) if batch.messages is not None else len(batch.data)

    def cut(n: int) -> int:
        """Where a prefix of at most n bytes (or messages) ends: after the last whole append
        that fits, or inside the first when even that does not (then never inside a
        character of text)."""
        if json_mode or n >= count:
            return n
        clean = batch.clean_cut(n)
        if text and clean == n and not batch.ends_at(batch.start + n):
            return text_boundary(batch.data, n)
        return clean

    last: tuple[int, bytes] | None = None  # the latest rendering: usually the one served

    def body(n: int) -> bytes:
        nonlocal last
        if last is None or last[0] != n:
            last = (n, render(batch.head(n)))
        return last[1]

    whole = body(count)
    if encoded_size_bound(len(whole), wire_type) <= budget:
        return batch.head(count), whole  # fits however encoded: unweighed (5 MB of JSON: 17 ms)
    size = largest_fitting(count, lambda n: encoded_size(body(cut(n)), wire_type), budget)
    chosen = cut(max(size, 1)) if count else 0
    return batch.head(chosen), body(chosen)
