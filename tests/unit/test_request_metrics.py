"""How a request is counted for operators: its operation, its read shape, its caching."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.http.request_metrics import (
    Operation,
    cache_class,
    operation_of,
    parse_query,
    read_shape,
)

BASE = "/v1/stream"


@pytest.mark.parametrize(
    ("method", "path", "query", "operation"),
    [
        ("POST", "/v1/stream/a", b"", Operation.APPEND),
        ("PUT", "/v1/stream/a/b", b"", Operation.CREATE),
        ("DELETE", "/v1/stream/a", b"", Operation.DELETE),
        ("HEAD", "/v1/stream/a", b"", Operation.HEAD),
        ("GET", "/v1/stream/a", b"offset=-1", Operation.CATCH_UP),
        ("GET", "/v1/stream/a", b"", Operation.CATCH_UP),
        ("GET", "/v1/stream/a", b"offset=now", Operation.CATCH_UP),
        ("GET", "/v1/stream/a", b"offset=5&live=long-poll&cursor=3", Operation.LONG_POLL),
        ("GET", "/v1/stream/a", b"live=sse&offset=-1", Operation.SSE),
        ("GET", "/v1/stream/a", b"live=bogus", Operation.CATCH_UP),
        ("OPTIONS", "/v1/stream/a", b"", None),
        ("GET", "/v1/stream/__ds/subscriptions/x", b"", None),
        ("POST", "/v1/stream/__ds/subscriptions/x/claim", b"", None),
        ("GET", "/v1/stream", b"prefix=a", None),
        ("GET", "/healthz", b"", None),
        ("GET", "/v1/streamlike/a", b"", None),
    ],
)
def test_the_operation_of_a_request(
    method: str, path: str, query: bytes, operation: Operation | None
) -> None:
    assert operation_of(method, path, parse_query(query), BASE) is operation


def test_every_operation_has_its_own_latency_metric() -> None:
    names = [operation.value.value for operation in Operation]
    assert len(set(names)) == len(names) and all(name.endswith("Latency") for name in names)


@pytest.mark.parametrize(
    ("operation", "query", "shape"),
    [
        (Operation.CATCH_UP, b"offset=-1", "from-start"),
        (Operation.CATCH_UP, b"", "from-start"),
        (Operation.CATCH_UP, b"offset=0000000000000000_0000000000000005", "catch-up"),
        (Operation.CATCH_UP, b"offset=now", "now"),
        (Operation.LONG_POLL, b"offset=now&live=long-poll", "long-poll"),
        (Operation.SSE, b"offset=-1&live=sse", "sse"),
    ],
)
def test_the_shape_of_a_reads_cache_key(operation: Operation, query: bytes, shape: str) -> None:
    assert read_shape(operation, parse_query(query)) == shape


@pytest.mark.parametrize(
    ("cache_control", "kind"),
    [
        ("public, max-age=60, stale-while-revalidate=300", "shared"),
        ("private, max-age=60", "private"),
        ("no-store", "no-store"),
        ("no-cache, no-store", "no-store"),
        ("No-Store", "no-store"),
        ("public", "none"),
        (None, "none"),
    ],
)
def test_the_caching_a_response_allows(cache_control: str | None, kind: str) -> None:
    assert cache_class(cache_control) == kind
