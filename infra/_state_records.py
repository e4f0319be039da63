"""The emulator's items and objects written out as requests: a compacted journal's body.

Only the tables and buckets a journal created are written out: the process may hold others
(the tests run many emulators in one process, over one moto).

Each item becomes one PutItem and each object one PutObject, signed for the account and region
they live in (moto files a request by its credential scope, and checks no signature).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from ._dynamodb_json import encode
from ._journal import Record

_ACCESS_KEY = "emulator"


def _authorization(region: str, service: str) -> str:
    return (
        f"AWS4-HMAC-SHA256 Credential={_ACCESS_KEY}/20250101/{region}/{service}/aws4_request, "
        "SignedHeaders=host, Signature=0"
    )


def _put_item(region: str, table: str, item: dict[str, object]) -> Record:
    body = encode({"TableName": table, "Item": item}).encode()
    return Record(
        {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/",
            "CONTENT_TYPE": "application/x-amz-json-1.0",
            "HTTP_HOST": f"dynamodb.{region}.amazonaws.com",
            "HTTP_X_AMZ_TARGET": "DynamoDB_20120810.PutItem",
            "HTTP_AUTHORIZATION": _authorization(region, "dynamodb"),
        },
        body,
    )


def _put_object(bucket: str, key: str, body: bytes) -> Record:
    path = f"/{bucket}/{key}"
    return Record(
        {
            "REQUEST_METHOD": "PUT",
            "PATH_INFO": path.encode().decode("latin-1"),  # PEP 3333: bytes as latin-1
            "RAW_URI": quote(path, safe="/"),
            "HTTP_HOST": "s3.amazonaws.com",
            "HTTP_AUTHORIZATION": _authorization("us-east-1", "s3"),
        },
        body,
    )


def _tables(names: set[str]) -> Iterator[tuple[str, Any]]:
    """(region, table) for every table of those named, in every account and region."""
    from moto.dynamodb.models import dynamodb_backends

    for account in dynamodb_backends.values():
        for region, backend in account.items():
            for table in backend.tables.values():
                if table.name in names:
                    yield region, table


def _buckets(names: set[str]) -> Iterator[Any]:
    from moto.s3.models import s3_backends

    seen: set[int] = set()
    for account in s3_backends.values():
        for backend in account.values():
            if id(backend) in seen:  # one backend may be filed under several partitions
                continue
            seen.add(id(backend))
            for bucket in backend.buckets.values():
                if bucket.name in names:
                    yield bucket


def _current_objects(bucket: Any) -> Iterator[tuple[str, Any]]:
    from moto.s3.models import FakeDeleteMarker

    for name in list(bucket.keys):
        current = bucket.keys[name]
        if not isinstance(current, FakeDeleteMarker):
            yield name, current


def item_records(tables: set[str]) -> Iterator[Record]:
    """A PutItem for every item of the `tables` named, in every account and region."""
    from moto.dynamodb.models.utilities import dynamo_to_dict

    for region, table in _tables(tables):
        for item in table.all_items():
            yield _put_item(region, table.name, dynamo_to_dict(item.attrs))


def object_records(buckets: set[str]) -> Iterator[Record]:
    """A PutObject for the current version of every object of the `buckets` named."""
    for bucket in _buckets(buckets):
        for name, current in _current_objects(bucket):
            yield _put_object(bucket.name, name, current.value)


def held_bytes(tables: set[str], buckets: set[str]) -> int:
    """About what the items and objects of those tables and buckets take: the size of what a
    compacted journal would hold."""
    items = sum(item.size() for _, table in _tables(tables) for item in table.all_items())
    objects = sum(
        current.size for bucket in _buckets(buckets) for _, current in _current_objects(bucket)
    )
    return items + objects
