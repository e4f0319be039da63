"""Header parsing: TTL, Expires-At, Stream-Closed, producer headers, media types."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.headers import (
    DEFAULT_CONTENT_TYPE,
    JSON_MEDIA_TYPE,
    MAX_SAFE_INTEGER,
    ProducerClaim,
    check_content_encoding,
    check_lifetime,
    format_expires_at,
    is_active_content,
    is_json,
    is_true,
    media_type,
    parse_content_type,
    parse_expires_at,
    parse_producer,
    parse_stream_seq,
    parse_ttl,
    single_value,
)
from durable_streams_aws.core.protocol.limits import MAX_PRODUCER_ID_BYTES, MAX_TTL_SECONDS

JAN_1_2030 = datetime(2030, 1, 1, tzinfo=UTC).timestamp()


def _is_400(call) -> None:
    with pytest.raises(ProtocolError) as info:
        call()
    assert info.value.status == 400


# ---------------------------------------------------------------- Stream-TTL


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("1", 1),
        ("60", 60),
        ("3600", 3600),
        ("86400", 86400),
        ("10", 10),
        ("100", 100),
        (str(2**53 - 1), 2**53 - 1),
        (" 3600 ", 3600),  # surrounding whitespace is not part of an HTTP field value
    ],
)
def test_ttl_accepted(value: str, expected: int) -> None:
    assert parse_ttl(value) == expected


def test_ttl_absent() -> None:
    assert parse_ttl(None) is None


@pytest.mark.parametrize(
    "value",
    [
        "+60",
        "00060",
        "00",
        "01",
        "03600",
        "60.5",
        "3600.0",
        "1e3",
        "3.6e3",
        "-1",
        "-0",
        "abc",
        "",
        " ",
        "0x10",
        "60s",
        "6 0",
        "1_000",
        "\u0665",  # Arabic-Indic five
        "\uff16\uff10",  # full-width 60
        "60,60",
    ],
)
def test_ttl_rejected(value: str) -> None:
    _is_400(lambda: parse_ttl(value))


def test_ttl_with_huge_number_is_a_400() -> None:
    _is_400(lambda: parse_ttl("9" * 5000))


# ---------------------------------------------------------------- Stream-Expires-At


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2030-01-01T00:00:00Z", JAN_1_2030),
        ("2030-01-01T00:00:00z", JAN_1_2030),
        ("2030-01-01t00:00:00Z", JAN_1_2030),
        ("2030-01-01 00:00:00Z", JAN_1_2030),
        ("2030-01-01T00:00:00+00:00", JAN_1_2030),
        ("2030-01-01T00:00:00-00:00", JAN_1_2030),
        ("2030-01-01T01:00:00+01:00", JAN_1_2030),
        ("2029-12-31T19:00:00-05:00", JAN_1_2030),
        ("2030-01-01T05:30:00+05:30", JAN_1_2030),
        ("2030-01-01T00:00:00.5Z", JAN_1_2030 + 0.5),
        ("2030-01-01T00:00:00.123Z", JAN_1_2030 + 0.123),
        ("2030-01-01T00:00:00.123456Z", JAN_1_2030 + 0.123456),
        ("2030-01-01T00:00:00.250+00:00", JAN_1_2030 + 0.25),
        (" 2030-01-01T00:00:00Z ", JAN_1_2030),
    ],
)
def test_expires_at_accepted(value: str, expected: float) -> None:
    assert parse_expires_at(value) == pytest.approx(expected, abs=1e-6)


def test_expires_at_nanosecond_fraction_accepted() -> None:
    assert parse_expires_at("2030-01-01T00:00:00.123456789Z") == pytest.approx(
        JAN_1_2030 + 0.123456, abs=1e-5
    )


def test_expires_at_absent() -> None:
    assert parse_expires_at(None) is None


@pytest.mark.parametrize(
    "value",
    [
        "not-a-timestamp",
        "",
        " ",
        "2030-01-01T00:00:00",  # no zone
        "2030-01-01T00:00:00.5",  # no zone, with fraction
        "2030-01-01",  # date only
        "2030-01-01T00:00Z",  # no seconds
        "2030-01-01T00:00:00+0000",  # offset without colon
        "2030-01-01T00:00:00+00",  # short offset
        "2030-01-01T00:00:00 Z",
        "2030-01-01T00:00:00.Z",  # empty fraction
        "2030-13-01T00:00:00Z",  # month 13
        "2030-02-30T00:00:00Z",  # no such day
        "2030-01-01T25:00:00Z",
        "2030-01-01T00:60:00Z",
        "2030-01-01T00:00:00+99:00",
        "2030/01/01T00:00:00Z",
        "20300101T000000Z",
        "1893456000",  # epoch seconds
        "Tue, 01 Jan 2030 00:00:00 GMT",  # HTTP date
        "2030-01-01T00:00:00ZZ",
        "2030-01-01T00:00:00Z\x00",
        "\u0662\u0660\u0663\u0660-01-01T00:00:00Z",  # Arabic-Indic year digits
    ],
)
def test_expires_at_rejected(value: str) -> None:
    _is_400(lambda: parse_expires_at(value))


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (JAN_1_2030, "2030-01-01T00:00:00.000Z"),
        (JAN_1_2030 + 0.5, "2030-01-01T00:00:00.500Z"),
        (JAN_1_2030 + 0.123, "2030-01-01T00:00:00.123Z"),
        (0.0, "1970-01-01T00:00:00.000Z"),
    ],
)
def test_format_expires_at(seconds: float, text: str) -> None:
    assert format_expires_at(seconds) == text


@pytest.mark.parametrize("seconds", [JAN_1_2030, JAN_1_2030 + 0.25, 1_700_000_000.125, 0.0])
def test_format_then_parse_expires_at_round_trip(seconds: float) -> None:
    assert parse_expires_at(format_expires_at(seconds)) == pytest.approx(seconds, abs=1e-3)


# ---------------------------------------------------------------- Stream-Closed


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "tRuE", " true ", "true\t"])
def test_is_true_accepts_true_in_any_case(value: str) -> None:
    assert is_true(value) is True


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        " ",
        "false",
        "FALSE",
        "1",
        "0",
        "yes",
        "on",
        "t",
        "truee",
        "tru",
        "true,true",
        "'true'",
    ],
)
def test_is_true_rejects_everything_else(value: str | None) -> None:
    assert is_true(value) is False


# ---------------------------------------------------------------- producer headers


def test_producer_absent() -> None:
    assert parse_producer(None, None, None) is None


@pytest.mark.parametrize(
    ("producer_id", "epoch", "seq", "expected"),
    [
        ("p", "0", "0", ProducerClaim("p", 0, 0)),
        ("order-service-1", "3", "17", ProducerClaim("order-service-1", 3, 17)),
        (
            "6f1c7c8e-2f6a-4c39-9a4c-1d2f3e4a5b6c",
            "1",
            "0",
            ProducerClaim("6f1c7c8e-2f6a-4c39-9a4c-1d2f3e4a5b6c", 1, 0),
        ),
        ("p", str(MAX_SAFE_INTEGER), "0", ProducerClaim("p", MAX_SAFE_INTEGER, 0)),
        ("p", "0", str(MAX_SAFE_INTEGER), ProducerClaim("p", 0, MAX_SAFE_INTEGER)),
        ("p", " 2 ", " 5 ", ProducerClaim("p", 2, 5)),
        ("prod\u00fccer", "0", "0", ProducerClaim("prod\u00fccer", 0, 0)),
    ],
)
def test_producer_accepted(producer_id: str, epoch: str, seq: str, expected: ProducerClaim) -> None:
    assert parse_producer(producer_id, epoch, seq) == expected


@pytest.mark.parametrize(
    ("producer_id", "epoch", "seq"),
    [
        ("p", None, None),
        (None, "0", None),
        (None, None, "0"),
        ("p", "0", None),
        ("p", None, "0"),
        (None, "0", "0"),
    ],
)
def test_producer_headers_all_or_none(
    producer_id: str | None, epoch: str | None, seq: str | None
) -> None:
    _is_400(lambda: parse_producer(producer_id, epoch, seq))


@pytest.mark.parametrize("producer_id", ["", " ", "\t", "  \t "])
def test_producer_empty_id_rejected(producer_id: str) -> None:
    _is_400(lambda: parse_producer(producer_id, "0", "0"))


BAD_COUNTERS = [
    "",
    " ",
    "abc",
    "1.0",
    "1.5",
    "1e3",
    "0x1",
    "+1",
    "-1",
    "-0",
    "01",
    "1 2",
    "\u0665",
    str(MAX_SAFE_INTEGER + 1),
    str(2**64),
    "9" * 30,
]


@pytest.mark.parametrize("value", BAD_COUNTERS)
def test_producer_bad_epoch_rejected(value: str) -> None:
    _is_400(lambda: parse_producer("p", value, "0"))


@pytest.mark.parametrize("value", BAD_COUNTERS)
def test_producer_bad_seq_rejected(value: str) -> None:
    _is_400(lambda: parse_producer("p", "0", value))


@pytest.mark.parametrize(
    ("epoch", "seq"), [("9" * 5000, "0"), ("0", "9" * 5000)], ids=["epoch", "seq"]
)
def test_producer_huge_counter_is_a_400(epoch: str, seq: str) -> None:
    _is_400(lambda: parse_producer("p", epoch, seq))


# ---------------------------------------------------------------- media types


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/json", "application/json"),
        ("Application/JSON", "application/json"),
        ("application/json; charset=utf-8", "application/json"),
        ("application/json;charset=utf-8", "application/json"),
        ("  APPLICATION/JSON  ;  charset=UTF-8", "application/json"),
        ("text/plain; charset=us-ascii; format=flowed", "text/plain"),
        ("application/octet-stream", "application/octet-stream"),
        ("", ""),
        (";", ""),
    ],
)
def test_media_type(content_type: str, expected: str) -> None:
    assert media_type(content_type) == expected


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/json", True),
        ("APPLICATION/JSON", True),
        ("application/json; charset=utf-8", True),
        (" application/json ", True),
        ("application/ndjson", False),
        ("application/json-seq", False),
        ("application/problem+json", False),
        ("text/json", False),
        ("text/plain", False),
        ("", False),
    ],
)
def test_is_json(content_type: str, expected: bool) -> None:
    assert is_json(content_type) is expected


def test_constants() -> None:
    assert DEFAULT_CONTENT_TYPE == "application/octet-stream"
    assert JSON_MEDIA_TYPE == "application/json"
    assert MAX_SAFE_INTEGER == 9007199254740991


# ---------------------------------------------------------------- single values


def test_a_header_sent_once_is_its_value() -> None:
    assert single_value("Stream-Seq", []) is None
    assert single_value("Stream-Seq", ["abc"]) == "abc"


@pytest.mark.parametrize(
    "values",
    [
        ["true", "true"],  # repeated, as uvicorn sees it
        ["true,true"],  # repeated, as a Lambda Function URL joins it
        ["true, false"],
        ["a,b"],
    ],
)
def test_repeated_or_joined_headers_are_400(values: list[str]) -> None:
    with pytest.raises(ProtocolError) as refused:
        single_value("Stream-Closed", values)
    assert refused.value.status == 400 and "Stream-Closed must be sent once" in str(refused.value)


# ---------------------------------------------------------------- media types


@pytest.mark.parametrize(
    "value",
    [
        "text/plain",
        "application/json",
        "APPLICATION/JSON",
        "application/json; charset=utf-8",
        "text/plain;charset=UTF-8",
        'text/plain; format="fixed; really"',
        "application/vnd.example+json; version=2; q=x",
        "  text/plain  ",
    ],
)
def test_media_types_are_accepted(value: str) -> None:
    assert parse_content_type(value) == value.strip()


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        "text/",
        "/plain",
        "text/plain/extra",
        "text/plain, application/json",
        "text/plain; charset",
        'text/plain; x="unterminated',
        "text /plain",
        "t\u00e9xt/plain",
        "text/pl\u00e4in",
        "text/" + "x" * 300,
    ],
)
def test_things_that_are_not_media_types_are_400(value: str) -> None:
    _is_400(lambda: parse_content_type(value))


def test_only_unencoded_bodies_are_accepted() -> None:
    for value in (None, "identity", "IDENTITY", ""):
        check_content_encoding(value)
    for value in ("gzip", "br", "deflate", "gzip, identity"):
        with pytest.raises(ProtocolError) as refused:
            check_content_encoding(value)
        assert refused.value.status == 415


# ---------------------------------------------------------------- Stream-Seq, Producer-Id


def test_stream_seq_must_be_short_and_not_empty() -> None:
    assert parse_stream_seq(None) is None
    assert parse_stream_seq("0001") == "0001"
    assert parse_stream_seq("s" * 256) == "s" * 256
    _is_400(lambda: parse_stream_seq(""))
    _is_400(lambda: parse_stream_seq("s" * 257))


def test_producer_ids_are_bounded_in_bytes() -> None:
    longest = "\u00e9" * (MAX_PRODUCER_ID_BYTES // 2)  # two bytes each
    assert parse_producer(longest, "0", "0") == ProducerClaim(longest, 0, 0)
    _is_400(lambda: parse_producer(longest + "x", "0", "0"))
    _is_400(lambda: parse_producer("p" * 1100, "0", "0"))


# ---------------------------------------------------------------- lifetimes

NOW = 1_900_000_000.0


@pytest.mark.parametrize(
    ("ttl", "expires_at"),
    [
        (None, None),
        (1, None),
        (MAX_TTL_SECONDS, None),
        (None, NOW + 0.5),
        (None, NOW + MAX_TTL_SECONDS),
    ],
)
def test_lifetimes_within_bounds(ttl: int | None, expires_at: float | None) -> None:
    check_lifetime(ttl, expires_at, NOW)


@pytest.mark.parametrize(
    ("ttl", "expires_at", "why"),
    [
        (60, NOW + 60, "not both"),
        (0, None, "between 1 and"),
        (MAX_TTL_SECONDS + 1, None, "between 1 and"),
        (None, NOW, "in the past"),
        (None, NOW - 3600, "in the past"),
        (None, NOW + MAX_TTL_SECONDS + 1, "at most"),
        # 9999-12-31T23:59:59-14:00 is in the year 10000 in UTC: refused, never stored.
        (None, parse_expires_at("9999-12-31T23:59:59-14:00"), "at most"),
    ],
)
def test_lifetimes_out_of_bounds_are_400(
    ttl: int | None, expires_at: float | None, why: str
) -> None:
    with pytest.raises(ProtocolError) as refused:
        check_lifetime(ttl, expires_at, NOW)
    assert refused.value.status == 400 and why in refused.value.message


@pytest.mark.parametrize(
    ("content_type", "active"),
    [
        ("text/html", True),
        ("Text/HTML ; charset=utf-8", True),
        ("image/svg+xml", True),
        ("application/xhtml+xml", True),
        ("application/atom+xml", True),
        ("application/xml", True),
        ("text/xml", True),
        ("text/xsl", True),
        ("application/pdf", True),
        ("text/javascript", True),
        ("application/ecmascript", True),
        ("multipart/x-mixed-replace; boundary=x", True),
        ("text/plain", False),
        ("application/json", False),
        ("application/octet-stream", False),
        ("image/png", False),
        ("text/event-stream", False),
        ("application/x-ndjson", False),
        ("text/htmlx", False),
        ("", False),
    ],
)
def test_types_a_browser_renders_actively(content_type: str, active: bool) -> None:
    assert is_active_content(content_type) is active
