"""Behaviour that must be the same under uvicorn and under Lambda Function URL events:
repeated protocol headers, and stream names outside ASCII."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from hosts import AsgiHost, Host, LambdaHost
from storage_checks import scan

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.runtime import Backend

BASE = "/v1/stream"
TEXT = [("content-type", "text/plain")]
OFFSET_ZERO = "0" * 16 + "_" + "0" * 16


@pytest.fixture(params=["uvicorn", "lambda"])
def host(request: pytest.FixtureRequest, backend: Backend) -> Iterator[Host]:
    app = create_app(backend.settings, backend.store)
    chosen = AsgiHost(app) if request.param == "uvicorn" else LambdaHost(app)
    assert chosen.request("PUT", f"{BASE}/s", TEXT, b"data").status == 201
    yield chosen
    chosen.close()


# (method, header, the value sent twice, the other headers the request needs)
REPEATABLE = [
    ("POST", "Stream-Closed", "true", TEXT),
    ("POST", "Stream-Seq", "1", TEXT),
    ("POST", "Producer-Id", "p", [*TEXT, ("producer-epoch", "0"), ("producer-seq", "0")]),
    ("POST", "Producer-Epoch", "0", [*TEXT, ("producer-id", "p"), ("producer-seq", "0")]),
    ("POST", "Producer-Seq", "0", [*TEXT, ("producer-id", "p"), ("producer-epoch", "0")]),
    ("POST", "Content-Type", "text/plain", []),
    ("PUT", "Stream-TTL", "60", TEXT),
    ("PUT", "Stream-Expires-At", "2099-01-01T00:00:00Z", TEXT),
    ("PUT", "Stream-Closed", "true", TEXT),
    ("PUT", "Stream-Forked-From", f"{BASE}/s", []),
    ("PUT", "Stream-Fork-Offset", OFFSET_ZERO, [("stream-forked-from", f"{BASE}/s")]),
    (
        "PUT",
        "Stream-Fork-Sub-Offset",
        "1",
        [("stream-forked-from", f"{BASE}/s"), ("stream-fork-offset", OFFSET_ZERO)],
    ),
]


@pytest.mark.parametrize(
    ("method", "header", "value", "others"),
    REPEATABLE,
    ids=[f"{method}-{header}" for method, header, _, _ in REPEATABLE],
)
def test_a_repeated_protocol_header_is_400_under_both_hosts(
    host: Host,
    backend: Backend,
    method: str,
    header: str,
    value: str,
    others: list[tuple[str, str]],
) -> None:
    target = f"{BASE}/s" if method == "POST" else f"{BASE}/new"
    before = scan(backend)
    answer = host.request(method, target, [*others, (header, value), (header, value)], b"x")
    assert answer.status == 400, answer.body
    assert f"{header} must be sent once" in answer.json()["message"]
    assert scan(backend) == before


def test_a_doubled_close_neither_closes_nor_silently_appends(host: Host) -> None:
    closing = [*TEXT, ("stream-closed", "true"), ("stream-closed", "true")]
    assert host.request("POST", f"{BASE}/s", closing, b"more").status == 400
    state = host.request("HEAD", f"{BASE}/s")
    assert state.status == 200 and "stream-closed" not in state.headers
    assert host.request("GET", f"{BASE}/s?offset=-1").body == b"data"


@pytest.mark.parametrize(
    "name",
    ["\u65e5\u672c", "caf\u00e9", "emoji-\U0001f600", "spaces and %percent", "a/b/\u00fc"],
)
def test_names_outside_ascii_work_and_get_a_percent_encoded_location(host: Host, name: str) -> None:
    target = f"{BASE}/{quote(name)}"
    created = host.request("PUT", target, TEXT, b"hello")
    assert created.status == 201, created.body
    location = created.headers["location"]
    assert location.isascii() and location.endswith(target)
    scheme = "https" if host.name == "lambda" else "http"  # Function URLs are HTTPS only
    assert location == f"{scheme}://streams.test{target}"
    assert host.request("PUT", target, TEXT).status == 200  # the same stream again
    assert host.request("GET", f"{target}?offset=-1").body == b"hello"
    assert host.request("DELETE", target).status == 204


@pytest.mark.parametrize(
    ("kind", "download"),
    [
        ("text/html", True),
        ("text/html; charset=utf-8", True),
        ("image/svg+xml", True),
        ("application/xhtml+xml", True),
        ("TEXT/XML", True),
        ("application/javascript", True),
        ("text/plain", False),
        ("application/json", False),
        ("application/octet-stream", False),
    ],
)
def test_stored_content_cannot_run_script_on_the_origin(
    host: Host, kind: str, download: bool
) -> None:
    """A writer chooses the content type and the bytes: every response carries a sandboxing
    Content-Security-Policy, and reads of a type a browser would render actively are served
    as downloads (catch-up, long-poll, offset=now and HEAD alike)."""
    body = b'["<svg onload=alert(1)>"]' if "json" in kind else b"<script>alert(1)</script>"
    name = f"{BASE}/active-{abs(hash(kind))}"
    assert host.request("PUT", name, [("content-type", kind)], body).status == 201
    answers = [
        host.request("GET", f"{name}?offset=-1"),
        host.request("GET", f"{name}?offset=now"),
        host.request("GET", f"{name}?offset=-1&live=long-poll"),  # data at once: no wait
        host.request("HEAD", name),
    ]
    for answer in answers:
        assert answer.headers["content-security-policy"] == "sandbox; default-src 'none'"
        assert answer.headers["x-content-type-options"] == "nosniff"
        if "content-type" in answer.headers:
            assert (answer.headers.get("content-disposition") == "attachment") is download
    # Errors and other answers carry the policy too.
    assert "content-security-policy" in host.request("GET", f"{BASE}/absent").headers
