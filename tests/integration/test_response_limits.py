"""No response may exceed what the front door carries, whatever the content and read mode.

Streams of awkward content (newline-rich text, non-ASCII text, escape-heavy and tiny JSON
messages, binary) are read back whole in every mode, catch-up, long-poll and bounded-window SSE,
under both hosts. Every answer's body is measured as Lambda would send it and must fit the
budget, every body must be valid for its type, and the pieces must reassemble the stream
exactly. A budget far below the real 6 MB keeps the reads many and the test fast; the last test
runs the reported cases at the real limits.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hosts import Answer, AsgiHost, Host, LambdaHost, lambda_body_bytes, lambda_payload_bytes
from support import sse_value

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.config import LAMBDA_MAX_RESPONSE_BYTES
from durable_streams_aws.core.http.envelope import encoded_size
from durable_streams_aws.core.runtime import Backend

BASE = "/v1/stream"
BUDGET = 40_000
LAMBDA_PAYLOAD_LIMIT = 6_291_556  # what a Function URL accepts, in bytes of JSON

rng = random.Random(1)
NEWLINES = b"\n" * 30_000 + b"a\r\n" * 10_000 + b"\r" * 5_000
CJK = ('\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \U0001f600 "q" \\ \n' * 3000).encode()
BINARY = bytes(rng.randrange(256) for _ in range(120_000))
TINY_JSON = [1] * 30_000
ESCAPED_JSON = [
    {"text": 'line\nbreak "quoted" \\ \u00e9\u65e5 \U0001f600', "i": i} for i in range(1500)
]

STREAMS: list[tuple[str, str, bytes]] = [
    ("newlines", "text/plain", NEWLINES),
    ("cjk", "text/plain; charset=utf-8", CJK),
    ("binary", "application/octet-stream", BINARY),
    ("tiny-json", "application/json", json.dumps(TINY_JSON).encode()),
    # Pretty-printed: each message keeps its own line breaks, which SSE turns into data lines.
    ("escaped-json", "application/json", json.dumps(ESCAPED_JSON, indent=2).encode()),
    # Mangum's text test is case-sensitive: this one leaves Lambda as base64.
    ("upper-json", "APPLICATION/JSON", json.dumps(ESCAPED_JSON).encode()),
]
MODES = ["catch-up", "bounded", "long-poll", "sse"]
# A bound past the tail: the read stops at the tail (a bulk reader's read, `until`).
PAST_THE_TAIL = f"{0:016d}_{999_999_999:016d}"


def _app_host(kind: str, backend: Backend, **settings: Any) -> Host:
    configured = backend.settings.model_copy(
        update={"sse_mode": "window", "long_poll_timeout": 0.2, **settings}
    )
    app = create_app(configured, backend.store)
    return AsgiHost(app) if kind == "uvicorn" else LambdaHost(app)


@pytest.fixture(params=["uvicorn", "lambda"])
def host(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Host]:
    chosen = _app_host(request.param, backend, max_response_bytes=BUDGET, max_read_bytes=1 << 20)
    yield chosen
    chosen.close()


def body_weight(answer: Answer) -> int:
    if answer.lambda_payload is not None:
        return lambda_body_bytes(answer)
    return encoded_size(answer.body, answer.headers["content-type"])


def parse_sse(body: bytes) -> tuple[list[str], dict[str, Any]]:
    """The data of each data event (lines joined by LF) and the last control event."""
    text = body.decode("utf-8")  # an SSE body must be UTF-8 as a whole
    data, control = [], {}
    for block in text.split("\n\n"):
        if not block:
            continue
        lines = block.split("\n")
        kind = lines[0].removeprefix("event: ")
        payload = "\n".join(sse_value(line) for line in lines[1:])
        if kind == "data":
            data.append(payload)
        else:
            control = json.loads(payload)
    return data, control


def read_whole(host: Host, name: str, content_type: str, mode: str, limit: int) -> list[bytes]:
    """Every piece of the stream, read in `mode`; each answer checked against `limit`.
    Catch-up (bounded or not) stops when up to date, long-poll at its first 204, SSE at a
    window that brought no data."""
    live = {
        "catch-up": "",
        "bounded": f"&until={PAST_THE_TAIL}",
        "long-poll": "&live=long-poll",
        "sse": "&live=sse",
    }[mode]
    pieces: list[bytes] = []
    offset = "-1"
    for _ in range(10_000):
        answer = host.request("GET", f"{BASE}/{name}?offset={offset}{live}")
        assert answer.status in {200, 204}, answer.body[:200]
        assert body_weight(answer) <= limit
        if answer.lambda_payload is not None:
            assert lambda_payload_bytes(answer) <= limit + 4096
        if answer.status == 204:
            return pieces
        if mode == "sse":
            events, control = parse_sse(answer.body)
            base64_data = answer.headers.get("stream-sse-data-encoding") == "base64"
            for event in events:
                pieces.append(base64.b64decode(event) if base64_data else event.encode())
            if control.get("upToDate") and not events:
                return pieces
            offset = control["streamNextOffset"]
            continue
        if "json" in content_type.lower():
            assert isinstance(json.loads(answer.body), list)
        pieces.append(answer.body)
        if mode in {"catch-up", "bounded"} and answer.headers.get("stream-up-to-date") == "true":
            return pieces
        offset = answer.headers["stream-next-offset"]
    raise AssertionError("the read never reached the tail")


def reassemble(pieces: list[bytes], content_type: str) -> Any:
    if "json" in content_type.lower():
        return [m for piece in pieces for m in json.loads(piece)]
    return b"".join(pieces)


def expected(content_type: str, data: bytes, mode: str) -> Any:
    if "json" in content_type.lower():
        return json.loads(data)
    if mode == "sse" and content_type.startswith("text/"):
        # SSE carries line breaks as separate data lines: they come back as LF.
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("name", "content_type", "data"), STREAMS, ids=[name for name, _, _ in STREAMS]
)
def test_every_read_fits_the_budget_and_the_stream_reassembles(
    host: Host, name: str, content_type: str, data: bytes, mode: str
) -> None:
    created = host.request("PUT", f"{BASE}/{name}", [("content-type", content_type)], data)
    assert created.status == 201, created.body[:300]
    pieces = read_whole(host, name, content_type, mode, BUDGET)
    assert len(pieces) > 1, "the budget was meant to split this read"
    assert reassemble(pieces, content_type) == expected(content_type, data, mode)


def test_the_reported_cases_at_the_real_limits(backend: Backend) -> None:
    """1 MB of newline-rich text over SSE (was a 6 MB event, a 7 MB payload), 1-byte JSON
    messages read with MaxReadBytes at 4 MiB (was an 8.4 MB body), and 4 MiB of binary."""
    host = _app_host(
        "lambda",
        backend,
        max_read_bytes=4 * 1024 * 1024,
        max_append_bytes=4 * 1024 * 1024,
    )
    text = b"\n" * (1024 * 1024)
    ones = b"[" + b",".join([b"1"] * 1_500_000) + b"]"
    binary = bytes(rng.randrange(256) for _ in range(4 * 1024 * 1024))
    assert (
        host.request("PUT", f"{BASE}/lines", [("content-type", "text/plain")], text).status == 201
    )
    json_type = [("content-type", "application/json")]
    assert host.request("PUT", f"{BASE}/ones", json_type, ones).status == 201
    assert host.request("POST", f"{BASE}/ones", json_type, ones).status == 204
    binary_type = [("content-type", "application/octet-stream")]
    assert host.request("PUT", f"{BASE}/bin", binary_type, binary).status == 201
    cases = [("lines", "text/plain", "sse"), ("ones", "application/json", "catch-up")]
    cases.append(("bin", "application/octet-stream", "catch-up"))
    for name, content_type, mode in cases:
        pieces = read_whole(host, name, content_type, mode, LAMBDA_MAX_RESPONSE_BYTES)
        # A read from the start may fill the front door; the others take MaxReadBytes.
        assert len(pieces[0]) <= LAMBDA_MAX_RESPONSE_BYTES
        assert max(map(len, pieces[1:]), default=0) <= 4 * 1024 * 1024
    first = host.request("GET", f"{BASE}/ones?offset=-1")
    assert lambda_payload_bytes(first) <= LAMBDA_PAYLOAD_LIMIT
