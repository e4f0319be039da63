"""Stream paths, and the limits that keep every key the store builds within DynamoDB's."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.limits import (
    DYNAMODB_PARTITION_KEY_BYTES,
    DYNAMODB_SORT_KEY_BYTES,
    MAX_PATH_BYTES,
    MAX_PRODUCER_ID_BYTES,
)
from durable_streams_aws.core.protocol.paths import parse_stream_path
from durable_streams_aws.core.storage import _items as items


@pytest.mark.parametrize(
    "path",
    [
        "a",
        "chat/room-1/events",
        "\u65e5\u672c",  # any Unicode name
        "caf\u00e9",
        "x" * MAX_PATH_BYTES,
        "\u00e9" * (MAX_PATH_BYTES // 2),  # 2 bytes each: exactly at the limit
        "a/__ds",  # reserved only as the first segment
        "__dsx/y",
        "~user/(1)",
    ],
)
def test_valid_paths(path: str) -> None:
    assert parse_stream_path(path) == path


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "1 to 1024 bytes"),
        ("x" * (MAX_PATH_BYTES + 1), "1 to 1024 bytes"),
        ("\u65e5" * 342, "1 to 1024 bytes"),  # 342 characters, 1026 bytes
        ("a\x00b", "control"),
        ("a\x7fb", "control"),
        ("a\x85b", "control"),
        ("bad-\ufffd", "valid UTF-8"),  # what %FF decodes to
        ("a/../b", "'..'"),
        ("./a", "'.'"),
        ("__ds", "reserved"),
        ("__ds/jwks.json", "reserved"),
        ("__ds/subscriptions/x", "reserved"),
    ],
)
def test_invalid_paths_are_400(path: str, why: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_stream_path(path)
    assert refused.value.status == 400 and why in refused.value.message


def test_keys_at_the_limits_fit_dynamodb() -> None:
    longest_path = "\u00e9" * (MAX_PATH_BYTES // 2)
    longest_producer = "\u00e9" * (MAX_PRODUCER_ID_BYTES // 2)
    stream = items.stream_key(longest_path)
    producer = items.producer_key(longest_path, longest_producer)
    for key in (stream, producer):
        assert len(key["pk"]["S"].encode()) <= DYNAMODB_PARTITION_KEY_BYTES
        assert len(key["sk"]["S"].encode()) <= DYNAMODB_SORT_KEY_BYTES
    assert len(items.chunk_sort_key(10**16 - 1)) <= DYNAMODB_SORT_KEY_BYTES


def test_the_store_refuses_keys_dynamodb_would_refuse() -> None:
    with pytest.raises(ValueError, match="partition key"):
        items.stream_key("x" * DYNAMODB_PARTITION_KEY_BYTES)
    with pytest.raises(ValueError, match="sort key"):
        items.producer_key("s", "p" * DYNAMODB_SORT_KEY_BYTES)
