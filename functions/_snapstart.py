"""The API function's cold start: what a first request would do once, done at init instead, and
the Lambda SnapStart runtime hooks.

`warm_up` runs a few requests through the whole function (Mangum, the middleware, routing, the
worker threads, the store) and each DynamoDB operation the requests use through botocore's
whole pipeline (serialising, endpoint rules, signing, parsing), with AWS answered in this
process: nothing is sent, nothing is stored, nothing is counted or logged. What stays behind is
what a first request would otherwise pay for: modules imported on first use, the middleware
stack, botocore's per-operation models, the worker thread.

With SnapStart (template.yaml) Lambda runs the init once, when a version is published, and
starts new instances from a snapshot of its memory, so one init is shared by many instances.
After each restore `after_restore` renews what they must not share:

- the `random` module's state: botocore draws its retry backoff from it, and instances restored
  from one snapshot would otherwise back off in step, at the same moments;
- pooled connections (closed before the snapshot too): a connection kept in a snapshot is dead
  by the time the snapshot is restored, and would cost a failed attempt to find out;
- the cached token keys and origin secret: their max-age is timed with `time.monotonic`, which
  says nothing of how long the snapshot was kept; they are fetched again on first use.

AWS credentials need nothing: a SnapStart function's come from Lambda's credentials endpoint
and botocore renews them by their expiry time on the wall clock, which a restore keeps right.
Ids drawn from `os.urandom` (uuid4: incarnations, object keys, request tokens) are drawn when
they are used, not at init.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.awsrequest import AWSResponse

from durable_streams_aws.core.auth.keys import StoredValue
from durable_streams_aws.core.auth.origin import ORIGIN_SECRET_HEADER
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage.aws import LazyClient

from .events import LambdaContext, function_url_event

Asgi = Callable[[dict[str, Any], Any], dict[str, Any]]

# Under the stream root, so the stream route runs; the answers never reach AWS.
_WARM_UP_STREAM = "warm-up"
_HOST = "warm-up.invalid"
_SOURCE_IP = "127.0.0.1"


class _Body:
    """A response body as botocore reads it."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.read()

    def read(self, *_: Any) -> bytes:
        content, self._content = self._content, b""
        return content


def _answer_in_process(request: Any, **_: Any) -> AWSResponse:
    """A `before-send` handler: every DynamoDB request is answered "{}" (no item, no items,
    a write that succeeded) without being sent."""
    return AWSResponse(request.url, 200, {}, _Body(b"{}"))


@contextmanager
def _answered_in_process(clients: Iterable[Any]) -> Iterator[None]:
    clients = list(clients)
    for client in clients:
        client.meta.events.register_first("before-send", _answer_in_process)
    try:
        yield
    finally:
        for client in clients:
            client.meta.events.unregister("before-send", _answer_in_process)


@contextmanager
def _quiet() -> Iterator[None]:
    """The access log would report the warm-up's requests as if someone had sent them."""
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def warm_up_events(backend: Backend, app: Any) -> list[dict[str, Any]]:
    """The health check, then a read, a metadata read and an append of a stream that does not
    exist (each answered 404 by the store, or refused by access control before it), carrying
    the origin secret when the origin is locked so that they get past the lock."""
    host = [("host", _HOST)]
    headers = [*host, ("content-type", "text/plain")]
    secrets: StoredValue[tuple[str, ...]] | None = getattr(app.state, "origin_secrets", None)
    if secrets is not None:
        headers.append((ORIGIN_SECRET_HEADER, secrets.current()[0]))
    path = f"{backend.settings.base_path}/{_WARM_UP_STREAM}"
    return [
        function_url_event("GET", "/healthz", host, b"", _SOURCE_IP),
        function_url_event("HEAD", path, headers, b"", _SOURCE_IP),
        function_url_event("GET", path, headers, b"", _SOURCE_IP),
        function_url_event("POST", path, headers, b"x", _SOURCE_IP),
    ]


def _prime_operations(backend: Backend) -> None:
    """The DynamoDB operations of appends, creates and catch-up reads, once each: botocore
    builds an operation's model and serialiser the first time it is called."""
    table = backend.settings.table
    key = {"pk": {"S": "warm-up"}, "sk": {"S": "warm-up"}}
    dynamodb = backend.dynamodb
    dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)
    dynamodb.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": key["pk"]},
        ConsistentRead=True,
    )
    dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": key}}])


def warm_up(asgi: Asgi, backend: Backend, app: Any) -> list[int]:
    """Everything a first request would do once, done now (module docstring); returns the
    status of each warm-up request."""
    # The first connection looks its host up, and `socket` encodes host names with the idna
    # codec, imported on first use (with unicodedata and stringprep).
    _WARM_UP_STREAM.encode("idna")
    with _quiet(), _answered_in_process([backend.dynamodb]):
        events = warm_up_events(backend, app)
        statuses = [asgi(event, LambdaContext())["statusCode"] for event in events]
        _prime_operations(backend)
    return statuses


def _close_connections(backend: Backend) -> None:
    backend.dynamodb.close()  # closes the pool; the next request opens a connection
    if not isinstance(backend.s3, LazyClient) or backend.s3.made:
        backend.s3.close()
    StoredValue.close_all_connections()


def before_snapshot(backend: Backend) -> None:
    # The S3 client is made on first use (a cold start without SnapStart rarely needs it);
    # made here, it is in the snapshot, and no restored instance pays for it.
    if isinstance(backend.s3, LazyClient):
        backend.s3.resolve()
    _close_connections(backend)


def after_restore(backend: Backend) -> None:
    random.seed()  # from os.urandom, which a restored instance draws anew
    _close_connections(backend)
    StoredValue.expire_all()


def register_hooks(backend: Backend) -> bool:
    """Registers the hooks with the runtime's Snapshot Restore for Python library; False where
    it is missing (outside Lambda's managed runtime nothing ever snapshots this process)."""
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:
        return False
    register_before_snapshot(before_snapshot, backend)
    register_after_restore(after_restore, backend)
    return True
