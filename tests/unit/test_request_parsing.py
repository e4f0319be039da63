"""Parsing a stream request into the protocol's values, without a server
(`core.http.requests`): every good form, and the exact status and message of each bad one."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.datastructures import Headers, QueryParams

from durable_streams_aws.core.http.requests import (
    AppendHeaders,
    CreateHeaders,
    ReadRequest,
    fork_source,
    parse_append,
    parse_create,
    parse_payload,
    parse_read,
    public_host,
)
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.headers import (
    DEFAULT_CONTENT_TYPE,
    PROTOCOL_HEADERS,
    ProducerClaim,
)
from durable_streams_aws.core.protocol.limits import MAX_STREAM_SEQ_BYTES, MAX_TTL_SECONDS
from durable_streams_aws.core.protocol.offsets import ReadStart, StartKind, format_offset
from durable_streams_aws.core.storage import CreateSpec, ForkRequest, Payload

BASE = "/v1/stream"
NOW = 1_900_000_000.0  # 2030-03-17
BUDGET = 6_000_000
OFFSET_5 = format_offset(5)
OFFSET_9 = format_offset(9)


def headers(*pairs: tuple[str, str]) -> Headers:
    return Headers(raw=[(name.lower().encode(), value.encode()) for name, value in pairs])


def refused(call: Callable[[], Any]) -> tuple[int, str]:
    with pytest.raises(ProtocolError) as info:
        call()
    return info.value.status, info.value.message


# ---------------------------------------------------------------------------- header names


def test_every_protocol_header_name_is_listed_once() -> None:
    assert len(set(PROTOCOL_HEADERS)) == len(PROTOCOL_HEADERS) == 19
    assert all(name.startswith(("Stream-", "Producer-")) for name in PROTOCOL_HEADERS)


# ---------------------------------------------------------------------------- PUT


def test_a_plain_create_defaults_to_octet_stream() -> None:
    parsed = parse_create(headers(), BASE, NOW)
    assert parsed == CreateHeaders(DEFAULT_CONTENT_TYPE, None, None, False, None)
    assert parsed.with_body(b"", BUDGET) == CreateSpec(DEFAULT_CONTENT_TYPE)


def test_a_create_reads_every_header() -> None:
    parsed = parse_create(
        headers(
            ("Content-Type", " application/json; charset=utf-8 "),
            ("Content-Encoding", "identity"),
            ("Stream-TTL", " 60 "),
            ("Stream-Closed", "TRUE"),
        ),
        BASE,
        NOW,
    )
    assert parsed == CreateHeaders("application/json; charset=utf-8", 60, None, True, None)
    spec = parsed.with_body(b'[{"a":1}, 2]', BUDGET)
    assert spec.payload == Payload(b'{"a":1}2', (7, 1))
    assert spec.closed and spec.ttl_seconds == 60


def test_a_create_may_be_given_an_expiry_instead() -> None:
    parsed = parse_create(headers(("Stream-Expires-At", "2030-03-18T00:00:00Z")), BASE, NOW)
    assert parsed.expires_at == datetime(2030, 3, 18, tzinfo=UTC).timestamp()
    assert parsed.ttl is None


def test_an_empty_json_array_creates_an_empty_stream() -> None:
    parsed = parse_create(headers(("Content-Type", "application/json")), BASE, NOW)
    assert parsed.with_body(b"[]", BUDGET).payload == Payload(b"", ())


@pytest.mark.parametrize(
    ("sent", "status", "message"),
    [
        (
            [("Content-Type", "text")],
            400,
            "Content-Type 'text' is not a media type (type/subtype)",
        ),
        (
            [("Content-Type", "a/b"), ("Content-Type", "c/d")],
            400,
            "Content-Type must be sent once, with a single value (no commas)",
        ),
        (
            [("Content-Encoding", "gzip")],
            415,
            "Content-Encoding 'gzip' is not supported: send the body as is",
        ),
        ([("Stream-TTL", "-1")], 400, "Stream-TTL must be a non-negative decimal integer"),
        ([("Stream-TTL", "1.5")], 400, "Stream-TTL must be a non-negative decimal integer"),
        ([("Stream-TTL", "0")], 400, f"Stream-TTL must be between 1 and {MAX_TTL_SECONDS} seconds"),
        (
            [("Stream-TTL", "1,2")],
            400,
            "Stream-TTL must be sent once, with a single value (no commas)",
        ),
        (
            [("Stream-Expires-At", "tomorrow")],
            400,
            "Stream-Expires-At must be an RFC 3339 timestamp",
        ),
        (
            [("Stream-Expires-At", "2030-02-30T00:00:00Z")],
            400,
            "Stream-Expires-At must be an RFC 3339 timestamp",
        ),
        ([("Stream-Expires-At", "2020-01-01T00:00:00Z")], 400, "Stream-Expires-At is in the past"),
        (
            [("Stream-Expires-At", "2099-01-01T00:00:00Z")],
            400,
            f"Stream-Expires-At must be at most {MAX_TTL_SECONDS} seconds from now",
        ),
        (
            [("Stream-TTL", "60"), ("Stream-Expires-At", "2030-03-18T00:00:00Z")],
            400,
            "send either Stream-TTL or Stream-Expires-At, not both",
        ),
        ([("Stream-Fork-Offset", OFFSET_5)], 400, "fork offsets need Stream-Forked-From"),
        ([("Stream-Fork-Sub-Offset", "1")], 400, "fork offsets need Stream-Forked-From"),
        (
            [("Stream-Forked-From", f"{BASE}/a"), ("Stream-Fork-Sub-Offset", "2")],
            400,
            "Stream-Fork-Sub-Offset needs Stream-Fork-Offset",
        ),
        (
            [("Stream-Forked-From", f"{BASE}/a"), ("Stream-Fork-Sub-Offset", "x")],
            400,
            "Stream-Fork-Sub-Offset must be a non-negative decimal integer",
        ),
        (
            [("Stream-Forked-From", f"{BASE}/a"), ("Stream-Fork-Offset", "5")],
            400,
            "malformed offset: '5'",
        ),
        (
            [("Stream-Forked-From", "/elsewhere/a")],
            400,
            f"Stream-Forked-From must be a stream path under {BASE}/",
        ),
        (
            [("Stream-Forked-From", f"{BASE}/a?x=1")],
            400,
            f"Stream-Forked-From must be a stream path under {BASE}/",
        ),
        (
            [("Stream-Forked-From", f"{BASE}/a#top")],
            400,
            f"Stream-Forked-From must be a stream path under {BASE}/",
        ),
        (
            [("Stream-Forked-From", f"https://other.example{BASE}/a"), ("Host", "api.example")],
            400,
            "Stream-Forked-From must name a stream on this server: send its path",
        ),
        (
            [("Stream-Forked-From", f"ftp://api.example{BASE}/a"), ("Host", "api.example")],
            400,
            "Stream-Forked-From must name a stream on this server: send its path",
        ),
        (
            [("Stream-Forked-From", "http://[::1")],
            400,
            "Stream-Forked-From must be the source stream's path",
        ),
        (
            [("Stream-Forked-From", f"{BASE}/a/../b")],
            400,
            "stream path must not contain '.' or '..' segments",
        ),
    ],
)
def test_a_bad_create_header_is_refused(
    sent: list[tuple[str, str]], status: int, message: str
) -> None:
    assert refused(lambda: parse_create(headers(*sent), BASE, NOW)) == (status, message)


def test_a_create_checks_its_headers_in_order() -> None:
    # A bad Content-Type is reported before a bad TTL, which is reported before a bad fork.
    sent = headers(("Content-Type", "x"), ("Stream-TTL", "x"), ("Stream-Fork-Offset", "x"))
    assert refused(lambda: parse_create(sent, BASE, NOW))[1].startswith("Content-Type")
    sent = headers(("Stream-TTL", "x"), ("Stream-Fork-Offset", "x"))
    assert refused(lambda: parse_create(sent, BASE, NOW))[1].startswith("Stream-TTL")


def test_a_fork_names_its_source_by_path_or_by_this_hosts_url() -> None:
    by_path = parse_create(headers(("Stream-Forked-From", f" {BASE}/a%20b ")), BASE, NOW)
    assert by_path.fork == ForkRequest("a b", None, 0)
    assert by_path.content_type is None  # inherited from the source
    for host in (("Host", "API.example"), ("X-Forwarded-Host", "api.example, proxy")):
        sent = headers(
            ("Stream-Forked-From", f"https://api.example{BASE}/a"),
            ("Stream-Fork-Offset", OFFSET_5),
            ("Stream-Fork-Sub-Offset", "2"),
            host,
        )
        assert parse_create(sent, BASE, NOW).fork == ForkRequest("a", 5, 2)


def test_fork_source_is_read_alone_for_access_control() -> None:
    assert fork_source(headers(), BASE) is None
    assert fork_source(headers(("Stream-Forked-From", f"{BASE}/x/y")), BASE) == "x/y"
    assert refused(lambda: fork_source(headers(("Stream-Forked-From", "/x")), BASE)) == (
        400,
        f"Stream-Forked-From must be a stream path under {BASE}/",
    )


def test_a_fork_with_a_body_needs_a_content_type() -> None:
    parsed = parse_create(headers(("Stream-Forked-From", f"{BASE}/a")), BASE, NOW)
    assert parsed.with_body(b"", BUDGET).payload == Payload()
    assert refused(lambda: parsed.with_body(b"x", BUDGET)) == (
        400,
        "a fork created with a body needs a Content-Type",
    )


# ---------------------------------------------------------------------------- POST


def test_an_append_reads_every_header() -> None:
    parsed = parse_append(
        headers(
            ("Content-Type", "text/plain"),
            ("Producer-Id", "p1"),
            ("Producer-Epoch", " 2 "),
            ("Producer-Seq", "7"),
            ("Stream-Seq", "0042"),
        )
    )
    assert parsed == AppendHeaders(False, ProducerClaim("p1", 2, 7), "0042", ("text/plain",))
    intent, payload = parsed.with_body(b"hello", BUDGET)
    assert intent == AppendIntent("text/plain", True, False, "0042", ProducerClaim("p1", 2, 7))
    assert payload == Payload(b"hello")


def test_a_close_only_append_ignores_its_content_type() -> None:
    parsed = parse_append(headers(("Stream-Closed", "true"), ("Content-Type", "not a type")))
    intent, payload = parsed.with_body(b"", BUDGET)
    assert intent == AppendIntent(None, False, True)
    assert payload == Payload()


def test_a_json_append_is_split_into_messages() -> None:
    parsed = parse_append(headers(("Content-Type", "application/json")))
    assert parsed.with_body(b' [1, "two"] ', BUDGET)[1] == Payload(b'1"two"', (1, 5))
    assert parsed.with_body(b'{"a": 1}', BUDGET)[1] == Payload(b'{"a": 1}', (8,))


@pytest.mark.parametrize(
    ("sent", "status", "message"),
    [
        (
            [("Producer-Id", "p")],
            400,
            "Producer-Id, Producer-Epoch and Producer-Seq must be sent together",
        ),
        (
            [("Producer-Id", " "), ("Producer-Epoch", "0"), ("Producer-Seq", "0")],
            400,
            "Producer-Id must not be empty",
        ),
        (
            [("Producer-Id", "p"), ("Producer-Epoch", "-1"), ("Producer-Seq", "0")],
            400,
            "Producer-Epoch must be a non-negative integer",
        ),
        (
            [("Producer-Id", "p"), ("Producer-Epoch", "0"), ("Producer-Seq", "9007199254740992")],
            400,
            "Producer-Seq must be at most 2^53-1",
        ),
        ([("Stream-Seq", "")], 400, f"Stream-Seq must be 1 to {MAX_STREAM_SEQ_BYTES} bytes"),
        (
            [("Stream-Seq", "a"), ("Stream-Seq", "b")],
            400,
            "Stream-Seq must be sent once, with a single value (no commas)",
        ),
        (
            [("Stream-Closed", "true, true")],
            400,
            "Stream-Closed must be sent once, with a single value (no commas)",
        ),
        (
            [("Content-Encoding", "br")],
            415,
            "Content-Encoding 'br' is not supported: send the body as is",
        ),
    ],
)
def test_a_bad_append_header_is_refused(
    sent: list[tuple[str, str]], status: int, message: str
) -> None:
    assert refused(lambda: parse_append(headers(*sent))) == (status, message)


@pytest.mark.parametrize(
    ("sent", "body", "status", "message"),
    [
        ([], b"", 400, "an append needs a body (or Stream-Closed: true to close)"),
        (
            [("Stream-Closed", "false")],
            b"",
            400,
            "an append needs a body (or Stream-Closed: true to close)",
        ),
        ([], b"x", 400, "an append with a body needs a Content-Type"),
        (
            [("Content-Type", "bad")],
            b"x",
            400,
            "Content-Type 'bad' is not a media type (type/subtype)",
        ),
        (
            [("Content-Type", "a/b"), ("Content-Type", "a/b")],
            b"x",
            400,
            "Content-Type must be sent once, with a single value (no commas)",
        ),
        ([("Content-Type", "application/json")], b"[]", 400, "an empty JSON array appends nothing"),
    ],
)
def test_a_bad_append_body_is_refused(
    sent: list[tuple[str, str]], body: bytes, status: int, message: str
) -> None:
    parsed = parse_append(headers(*sent))
    assert refused(lambda: parsed.with_body(body, BUDGET)) == (status, message)


def test_invalid_json_is_refused_with_the_decoders_reason() -> None:
    parsed = parse_append(headers(("Content-Type", "application/json")))
    status, message = refused(lambda: parsed.with_body(b"{", BUDGET))
    assert status == 400 and message.startswith("body is not valid JSON: ")


# ---------------------------------------------------------------------------- bodies


def test_a_json_message_that_could_never_be_read_back_is_refused() -> None:
    message = b'"' + b"a" * 3000 + b'"'  # base64-encoded in some responses: a third more
    assert parse_payload(
        message, "application/json", allow_empty_array=False, response_budget=BUDGET
    )
    status, text = refused(
        lambda: parse_payload(
            message, "application/json", allow_empty_array=False, response_budget=4000
        )
    )
    assert status == 413
    assert text.startswith(f"a JSON message of {len(message)} bytes would take ")
    assert text.endswith(" bytes in a response, more than the 4000 a response may carry")


def test_bytes_are_stored_as_sent() -> None:
    assert parse_payload(b"\xff\x00", "a/b", allow_empty_array=False, response_budget=1) == (
        Payload(b"\xff\x00")
    )
    assert parse_payload(b"", "application/json", allow_empty_array=False, response_budget=1) == (
        Payload()
    )


# ---------------------------------------------------------------------------- hosts


def test_the_public_host_is_the_cdns_then_the_requests() -> None:
    assert public_host(headers(("Host", "api.example:8080")), None) == "api.example:8080"
    sent = headers(("Host", "origin.example"), ("X-Forwarded-Host", "cdn.example, inner"))
    assert public_host(sent, None) == "cdn.example"
    assert public_host(headers(), ("10.0.0.1", 80)) == "10.0.0.1:80"
    assert public_host(headers(("Host", "[::1]:9")), None) == "[::1]:9"


@pytest.mark.parametrize("host", ["a b", "evil.example/path", "x:999999", "[zz]"])
def test_an_invalid_host_is_refused(host: str) -> None:
    assert refused(lambda: public_host(headers(("Host", host)), None)) == (
        400,
        "the Host header is not a valid host",
    )


def test_no_host_at_all_is_refused() -> None:
    assert refused(lambda: public_host(headers(), None)) == (
        400,
        "the Host header is not a valid host",
    )


# ---------------------------------------------------------------------------- GET


def read(query: str, *pairs: tuple[str, str]) -> ReadRequest:
    return parse_read(QueryParams(query), headers(*pairs))


def test_a_plain_read_starts_at_the_beginning() -> None:
    assert read("") == ReadRequest(ReadStart(StartKind.BEGINNING), None, None, None)
    assert read("offset=-1").start == ReadStart(StartKind.BEGINNING)


def test_a_read_reads_every_parameter() -> None:
    parsed = read(f"offset={OFFSET_5}&live=long-poll&cursor=c1", ("If-None-Match", '"etag"'))
    assert parsed.start == ReadStart(StartKind.POSITION, 5, whole=True)
    assert (parsed.live, parsed.cursor, parsed.if_none_match) == ("long-poll", "c1", '"etag"')
    assert not parsed.from_now
    assert read("offset=now&live=sse").from_now
    assert read(f"offset={OFFSET_5}&until={OFFSET_9}").until == 9


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("live=poll&offset=-1", "live must be long-poll or sse"),
        ("live=sse&live=sse&offset=-1", "live must be long-poll or sse"),
        ("live=", "live must be long-poll or sse"),
        ("live=sse", "live reads need an offset"),
        ("cursor=a&cursor=b", "cursor may be given once"),
        ("offset=-1&offset=now", "offset must be given at most once"),
        ("offset=12", "malformed offset: '12'"),
        (f"until={OFFSET_5}&until={OFFSET_9}", "until must be given at most once"),
        (
            f"offset=-1&live=long-poll&until={OFFSET_5}",
            "until bounds catch-up reads only, not live ones",
        ),
        (f"offset=now&until={OFFSET_5}", "until cannot bound a read from offset=now"),
        (f"offset={OFFSET_9}&until={OFFSET_5}", "until is before offset"),
        ("until=x", "malformed offset: 'x'"),
    ],
)
def test_a_bad_read_is_refused(query: str, message: str) -> None:
    assert refused(lambda: read(query)) == (400, message)
