"""A catalogue of hostile requests, sent under both hosts (uvicorn and Lambda events).

Every one must be answered with a 4xx and a short body, and must leave the table and the
bucket exactly as they were: no request may answer 5xx, and no refused request may change data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hosts import AsgiHost, Headers, Host, LambdaHost
from storage_checks import object_keys, scan

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.runtime import Backend

BASE = "/v1/stream"
TEXT = [("content-type", "text/plain")]
JSON = [("content-type", "application/json")]
PRODUCER = [("producer-id", "p"), ("producer-epoch", "0"), ("producer-seq", "0")]
MAX_APPEND = 64 * 1024
MAX_RESPONSE = 32 * 1024


@dataclass(frozen=True)
class Case:
    id: str
    method: str
    target: str
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    status: int = 400


def latin1(raw: bytes) -> str:
    """A header value as the app sees raw bytes (ASGI decodes headers as Latin-1)."""
    return raw.decode("latin-1")


CASES = [
    # ------------------------------------------------------------ names
    Case("name-not-utf8", "PUT", f"{BASE}/bad%FFname", TEXT),
    Case("name-cut-utf8", "PUT", f"{BASE}/cut%E6%97", TEXT),
    Case("name-too-long", "PUT", f"{BASE}/{'x' * 1025}", TEXT),
    Case("name-over-1024-bytes", "PUT", f"{BASE}/{'%E6%97%A5' * 342}", TEXT),
    Case("name-nul", "PUT", f"{BASE}/a%00b", TEXT),
    Case("name-del", "PUT", f"{BASE}/a%7Fb", TEXT),
    Case("name-c1-control", "PUT", f"{BASE}/a%C2%85b", TEXT),
    Case("name-dot-dot", "PUT", f"{BASE}/a/%2E%2E/b", TEXT),
    # The reserved segment holds the control API: never a stream, whatever the method.
    Case("reserved-create", "PUT", f"{BASE}/__ds/jwks.json", TEXT, status=405),
    Case("reserved-read", "GET", f"{BASE}/__ds/subscriptions/x", status=404),
    Case("reserved-append", "POST", f"{BASE}/__ds/x", TEXT, b"x", status=404),
    Case("reserved-delete", "DELETE", f"{BASE}/__ds"),
    Case("reserved-head", "HEAD", f"{BASE}/__ds/x", status=404),
    Case("reserved-subscription", "PUT", f"{BASE}/__ds/subscriptions/x", JSON, b"{", status=400),
    Case("reserved-claim", "GET", f"{BASE}/__ds/subscriptions/x/claim", status=405),
    # ------------------------------------------------------------ create headers
    Case("ttl-zero", "PUT", f"{BASE}/new", [*TEXT, ("stream-ttl", "0")]),
    Case("ttl-negative", "PUT", f"{BASE}/new", [*TEXT, ("stream-ttl", "-1")]),
    Case("ttl-beyond-max", "PUT", f"{BASE}/new", [*TEXT, ("stream-ttl", "9999999999")]),
    Case("ttl-float", "PUT", f"{BASE}/new", [*TEXT, ("stream-ttl", "1e3")]),
    Case("ttl-repeated", "PUT", f"{BASE}/new", [*TEXT, ("stream-ttl", "60"), ("stream-ttl", "60")]),
    Case(
        "ttl-and-expires",
        "PUT",
        f"{BASE}/new",
        [*TEXT, ("stream-ttl", "60"), ("stream-expires-at", "2099-01-01T00:00:00Z")],
    ),
    Case(
        "expires-past", "PUT", f"{BASE}/new", [*TEXT, ("stream-expires-at", "2001-01-01T00:00:00Z")]
    ),
    Case(
        "expires-year-10000",
        "PUT",
        f"{BASE}/new",
        [*TEXT, ("stream-expires-at", "9999-12-31T23:59:59-14:00")],
    ),
    Case(
        "expires-month-13",
        "PUT",
        f"{BASE}/new",
        [*TEXT, ("stream-expires-at", "2030-13-01T00:00:00Z")],
    ),
    Case("expires-garbage", "PUT", f"{BASE}/new", [*TEXT, ("stream-expires-at", "tomorrow")]),
    Case("content-type-garbage", "PUT", f"{BASE}/new", [("content-type", "garbage")]),
    Case("content-type-no-subtype", "PUT", f"{BASE}/new", [("content-type", "text/")]),
    Case(
        "content-type-list",
        "PUT",
        f"{BASE}/new",
        [("content-type", "text/plain, application/json")],
    ),
    Case("content-type-repeated", "PUT", f"{BASE}/new", [*TEXT, *JSON]),
    Case("content-type-latin1", "PUT", f"{BASE}/new", [("content-type", latin1(b"text/pl\xe4in"))]),
    Case("content-type-long", "PUT", f"{BASE}/new", [("content-type", "text/" + "x" * 300)]),
    Case(
        "content-encoding-create",
        "PUT",
        f"{BASE}/new",
        [*TEXT, ("content-encoding", "gzip")],
        b"\x1f\x8b\x08\x00",
        415,
    ),
    Case(
        "closed-repeated",
        "PUT",
        f"{BASE}/new",
        [*TEXT, ("stream-closed", "true"), ("stream-closed", "true")],
    ),
    Case("bad-host", "PUT", f"{BASE}/new", [*TEXT, ("host", "bad host!")]),
    Case("bad-host-latin1", "PUT", f"{BASE}/new", [*TEXT, ("host", latin1(b"h\xf6st"))]),
    Case("exists-differently", "PUT", f"{BASE}/text", JSON, status=409),
    Case("create-body-too-large", "PUT", f"{BASE}/new", TEXT, b"x" * (MAX_APPEND + 1), 413),
    Case("create-json-malformed", "PUT", f"{BASE}/new", JSON, b"[1,"),
    # ------------------------------------------------------------ forks
    Case(
        "fork-other-host",
        "PUT",
        f"{BASE}/f",
        [("stream-forked-from", "https://elsewhere.example/v1/stream/text")],
    ),
    Case(
        "fork-broken-url",
        "PUT",
        f"{BASE}/f",
        [("stream-forked-from", "http://[::1/v1/stream/text")],
    ),
    Case("fork-outside-root", "PUT", f"{BASE}/f", [("stream-forked-from", "/elsewhere/text")]),
    Case("fork-with-query", "PUT", f"{BASE}/f", [("stream-forked-from", f"{BASE}/text?x=1")]),
    Case("fork-reserved-source", "PUT", f"{BASE}/f", [("stream-forked-from", f"{BASE}/__ds/x")]),
    Case("fork-source-not-utf8", "PUT", f"{BASE}/f", [("stream-forked-from", f"{BASE}/%FF")]),
    Case(
        "fork-missing-source",
        "PUT",
        f"{BASE}/f",
        [("stream-forked-from", f"{BASE}/absent")],
        status=404,
    ),
    Case(
        "fork-offset-garbage",
        "PUT",
        f"{BASE}/f",
        [("stream-forked-from", f"{BASE}/text"), ("stream-fork-offset", "12")],
    ),
    Case(
        "fork-offset-alone", "PUT", f"{BASE}/f", [("stream-fork-offset", "0" * 16 + "_" + "0" * 16)]
    ),
    Case(
        "fork-sub-offset-negative",
        "PUT",
        f"{BASE}/f",
        [
            ("stream-forked-from", f"{BASE}/text"),
            ("stream-fork-offset", "0" * 16 + "_" + "0" * 16),
            ("stream-fork-sub-offset", "-1"),
        ],
    ),
    Case(
        "fork-sub-offset-overshoot",
        "PUT",
        f"{BASE}/f",
        [
            ("stream-forked-from", f"{BASE}/text"),
            ("stream-fork-offset", "0" * 16 + "_" + "0" * 16),
            ("stream-fork-sub-offset", "9999999999"),
        ],
    ),
    Case(
        "fork-json-inside-a-message",
        "PUT",
        f"{BASE}/f",
        [
            ("stream-forked-from", f"{BASE}/json"),
            ("stream-fork-offset", "0" * 16 + "_" + "5".zfill(16)),
        ],
    ),
    Case(
        "fork-from-repeated",
        "PUT",
        f"{BASE}/f",
        [("stream-forked-from", f"{BASE}/text"), ("stream-forked-from", f"{BASE}/json")],
    ),
    # ------------------------------------------------------------ appends
    Case(
        "append-content-type-garbage", "POST", f"{BASE}/text", [("content-type", "garbage")], b"x"
    ),
    Case(
        "append-content-type-list",
        "POST",
        f"{BASE}/text",
        [("content-type", "text/plain, text/html")],
        b"x",
    ),
    Case("append-no-content-type", "POST", f"{BASE}/text", [], b"x"),
    Case(
        "append-content-encoding",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("content-encoding", "gzip")],
        b"\x1f\x8b\x08\x00",
        415,
    ),
    Case("append-content-type-mismatch", "POST", f"{BASE}/text", JSON, b"1", 409),
    Case("append-empty", "POST", f"{BASE}/text", TEXT),
    Case("append-too-large", "POST", f"{BASE}/text", TEXT, b"x" * (MAX_APPEND + 1), 413),
    Case("append-to-closed", "POST", f"{BASE}/closed", TEXT, b"x", 409),
    Case("append-missing-stream", "POST", f"{BASE}/absent", TEXT, b"x", 404),
    Case(
        "producer-id-2kb",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("producer-id", "p" * 2000), ("producer-epoch", "0"), ("producer-seq", "0")],
        b"x",
    ),
    Case(
        "producer-id-latin1-long",
        "POST",
        f"{BASE}/text",
        [
            *TEXT,
            ("producer-id", latin1(b"\xe9" * 200)),
            ("producer-epoch", "0"),
            ("producer-seq", "0"),
        ],
        b"x",
    ),
    Case(
        "producer-id-empty",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("producer-id", " "), ("producer-epoch", "0"), ("producer-seq", "0")],
        b"x",
    ),
    Case(
        "producer-id-comma",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("producer-id", "a,b"), ("producer-epoch", "0"), ("producer-seq", "0")],
        b"x",
    ),
    Case(
        "producer-epoch-negative",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("producer-id", "p"), ("producer-epoch", "-1"), ("producer-seq", "0")],
        b"x",
    ),
    Case(
        "producer-seq-over-2^53",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("producer-id", "p"), ("producer-epoch", "0"), ("producer-seq", str(2**53))],
        b"x",
    ),
    Case("producer-partial", "POST", f"{BASE}/text", [*TEXT, ("producer-id", "p")], b"x"),
    Case(
        "producer-seq-repeated",
        "POST",
        f"{BASE}/text",
        [*TEXT, *PRODUCER, ("producer-seq", "1")],
        b"x",
    ),
    Case(
        "producer-gap",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("producer-id", "q"), ("producer-epoch", "0"), ("producer-seq", "5")],
        b"x",
        409,
    ),
    Case("stream-seq-long", "POST", f"{BASE}/text", [*TEXT, ("stream-seq", "s" * 300)], b"x"),
    Case("stream-seq-empty", "POST", f"{BASE}/text", [*TEXT, ("stream-seq", "")], b"x"),
    Case(
        "stream-seq-repeated",
        "POST",
        f"{BASE}/text",
        [*TEXT, ("stream-seq", "1"), ("stream-seq", "2")],
        b"x",
    ),
    Case(
        "close-repeated",
        "POST",
        f"{BASE}/text",
        [("stream-closed", "true"), ("stream-closed", "true")],
    ),
    Case("json-truncated", "POST", f"{BASE}/json", JSON, b"[1,"),
    Case("json-empty-array", "POST", f"{BASE}/json", JSON, b"[]"),
    Case("json-not-utf8", "POST", f"{BASE}/json", JSON, b'"\xff"'),
    Case("json-bom", "POST", f"{BASE}/json", JSON, "\ufeff[1]".encode()),
    Case("json-nan", "POST", f"{BASE}/json", JSON, b"[NaN]"),
    Case("json-deep", "POST", f"{BASE}/json", JSON, b"[" * 60_000),
    Case("json-whitespace", "POST", f"{BASE}/json", JSON, b"   "),
    Case(
        "json-message-unreadable",
        "POST",
        f"{BASE}/json",
        JSON,
        ('"' + "\u00e9" * 6000 + '"').encode(),
        413,
    ),
    # ------------------------------------------------------------ reads
    Case("offset-garbage", "GET", f"{BASE}/text?offset=abc"),
    Case(
        "offset-negative-position", "GET", f"{BASE}/text?offset=0000000000000000_-000000000000001"
    ),
    Case("offset-long", "GET", f"{BASE}/text?offset={'9' * 5000}"),
    Case("offset-twice", "GET", f"{BASE}/text?offset=-1&offset=now"),
    # Exact: a plain offset past the tail reads as the tail (the append still to come).
    Case("offset-past-tail", "GET", f"{BASE}/text?offset=0000000000000000_0000000000999999_i"),
    Case("live-unknown", "GET", f"{BASE}/text?offset=-1&live=forever"),
    Case("live-twice", "GET", f"{BASE}/text?offset=-1&live=sse&live=long-poll"),
    Case("live-without-offset", "GET", f"{BASE}/text?live=long-poll"),
    Case("read-missing", "GET", f"{BASE}/absent", status=404),
    Case("method-not-allowed", "PATCH", f"{BASE}/text", TEXT, b"x", 405),
]


@pytest.fixture(params=["uvicorn", "lambda"])
def host(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Host]:
    settings = backend.settings.model_copy(
        update={
            "max_append_bytes": MAX_APPEND,
            "max_response_bytes": MAX_RESPONSE,
            "long_poll_timeout": 0.2,
        }
    )
    app = create_app(settings, backend.store)
    chosen = AsgiHost(app) if request.param == "uvicorn" else LambdaHost(app)
    seed = [
        ("PUT", "text", TEXT, b"hello"),
        ("PUT", "json", JSON, b'[1, "twenty-two"]'),
        ("PUT", "closed", [*TEXT, ("stream-closed", "true")], b"final"),
        ("POST", "text", [*TEXT, *PRODUCER], b" world"),
    ]
    for method, name, headers, body in seed:
        assert chosen.request(method, f"{BASE}/{name}", headers, body).status < 300
    yield chosen
    chosen.close()


def snapshot(backend: Backend) -> tuple[str, frozenset[str]]:
    items = sorted(json.dumps(item, sort_keys=True, default=repr) for item in scan(backend))
    return json.dumps(items), frozenset(object_keys(backend))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_request_is_refused_and_changes_nothing(
    host: Host, backend: Backend, case: Case
) -> None:
    before = snapshot(backend)
    answer = host.request(case.method, case.target, case.headers, case.body)
    assert answer.status == case.status, answer.body[:300]
    assert len(answer.body) <= 512, "error bodies stay short"
    if case.method != "HEAD" and answer.headers.get("content-type") == "application/json":
        error = answer.json()
        if "/__ds/" in case.target:  # the control API's shape (PROTOCOL section 6)
            assert set(error) == {"error"} and {"code", "message"} <= set(error["error"])
        else:
            assert set(error) == {"error", "message"}
    assert snapshot(backend) == before, "a refused request changed stored data"


def test_catalogue_ids_are_unique() -> None:
    assert len({case.id for case in CASES}) == len(CASES)
