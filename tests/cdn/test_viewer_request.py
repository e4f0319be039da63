"""The CloudFront viewer-request function, run under Node on CloudFront-shaped events."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
FUNCTION = ROOT / "infra" / "cloudfront" / "viewer_request.js"
HARNESS = Path(__file__).resolve().parent / "run_viewer_request.cjs"


def run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node 20 is needed to test the CloudFront function")
    done = subprocess.run(
        [node, str(HARNESS), str(FUNCTION)],
        input=json.dumps(events),
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(done.stdout))


def event(
    query: dict[str, Any], method: str = "GET", headers: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "version": "1.0",
        "context": {"eventType": "viewer-request"},
        "viewer": {"ip": "192.0.2.1"},
        "request": {
            "method": method,
            "uri": "/v1/stream/chat/1",
            "querystring": query,
            "headers": {"host": {"value": "d111111abcdef8.cloudfront.net"}, **(headers or {})},
            "cookies": {},
        },
    }


READ = {"offset": {"value": "0000000000000000_0000000000000005"}, "live": {"value": "long-poll"}}
READ["cursor"] = {"value": "66933200"}


def test_every_order_of_the_parameters_gives_one_query() -> None:
    orders = [dict(order) for order in itertools.permutations(READ.items())]
    results = run([event(query) for query in orders])
    queries = [list(result["querystring"].items()) for result in results]
    assert all(query == queries[0] for query in queries)
    assert [name for name, _ in queries[0]] == ["cursor", "live", "offset"]
    assert queries[0] == [(name, {"value": READ[name]["value"]}) for name in sorted(READ)]


def test_unknown_parameters_are_kept_in_order_too() -> None:
    query = {"zeta": {"value": "1"}, "offset": {"value": "-1"}, "Alpha": {"value": "x"}}
    (result,) = run([event(query)])
    assert list(result["querystring"]) == ["Alpha", "offset", "zeta"]
    assert result["querystring"]["zeta"] == {"value": "1"}


def test_repeated_values_are_sorted() -> None:
    query = {
        "offset": {
            "value": "9",
            "multiValue": [{"value": "9"}, {"value": "10"}, {"value": "1"}],
        }
    }
    (result,) = run([event(query)])
    assert result["querystring"]["offset"] == {
        "value": "1",
        "multiValue": [{"value": "1"}, {"value": "10"}, {"value": "9"}],
    }


def test_empty_query_stays_empty() -> None:
    (result,) = run([event({})])
    assert result["querystring"] == {}


def test_head_requests_are_marked_and_gets_are_not() -> None:
    forged = {"x-ds-method": {"value": "HEAD"}}
    head, get, forged_get = run(
        [event(READ, "HEAD"), event(READ, "GET"), event(READ, "GET", forged)]
    )
    assert head["headers"]["x-ds-method"] == {"value": "HEAD"}
    assert "x-ds-method" not in get["headers"]
    assert "x-ds-method" not in forged_get["headers"]  # a viewer cannot split the cache with it


def test_the_viewer_host_is_passed_on() -> None:
    (result,) = run([event(READ, "PUT")])
    assert result["headers"]["x-forwarded-host"] == {"value": "d111111abcdef8.cloudfront.net"}
    assert result["headers"]["host"] == {"value": "d111111abcdef8.cloudfront.net"}
    assert result["uri"] == "/v1/stream/chat/1"
    assert result["method"] == "PUT"
