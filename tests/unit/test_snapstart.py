"""The API function's cold start: the warm-up done at init, and the SnapStart hooks that renew
after a restore what instances restored from one snapshot must not share (`functions._snapstart`).
The hooks are called directly: nothing here snapshots a process."""

from __future__ import annotations

import logging
import random
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
from mangum import Mangum

from durable_streams_aws.core.auth.keys import StoredValue
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import Backend, build_backend
from durable_streams_aws.functions import _snapstart

# Nothing listens here: a request that were really sent would fail.
NOWHERE = "http://127.0.0.1:9"
SECRET = "origin-secret-0123456789"


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _backend(**settings: Any) -> Backend:
    return build_backend(Settings(table="t", bucket="b", **settings), endpoint=NOWHERE)


class _Provider:
    """Powertools' provider, as `StoredValue` uses it: values in turn, calls counted."""

    def __init__(self, *values: str) -> None:
        self.values = list(values)
        self.fetched = 0
        self.client = types.SimpleNamespace(close=self._close)
        self.closed = 0

    def get(self, name: str, **_: Any) -> str:
        self.fetched += 1
        return self.values[min(self.fetched, len(self.values)) - 1]

    def _close(self) -> None:
        self.closed += 1


def _stored(provider: _Provider) -> StoredValue[str]:
    value = StoredValue(str, secret_id="arn:secret", max_age=300)
    value._client = provider
    return value


def test_warm_up_goes_through_every_layer_and_sends_nothing() -> None:
    backend = _backend()
    app = backend.app()
    statuses = _snapstart.warm_up(Mangum(app, lifespan="off"), backend, app)
    # The stream route reached the store, whose reads were answered "no such stream" in this
    # process: a request that had gone to NOWHERE would have failed (503) or raised.
    assert statuses == [200, 404, 404, 404]
    assert "anyio._backends._asyncio" in sys.modules  # the worker threads' backend, loaded
    assert "encodings.idna" in sys.modules


def test_warm_up_leaves_no_trace() -> None:
    backend = _backend()
    app = backend.app()
    disabled = logging.root.manager.disable
    _snapstart.warm_up(Mangum(app, lifespan="off"), backend, app)
    assert logging.root.manager.disable == disabled  # logging back as it was

    # The in-process answers are gone: the next call goes to the network again.
    sent: list[str] = []

    def record(request: Any, **_: Any) -> None:
        sent.append(request.url)
        raise RuntimeError("stop here")

    backend.dynamodb.meta.events.register("before-send", record)
    with pytest.raises(RuntimeError, match="stop here"):
        backend.dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "b"}})
    assert sent == [f"{NOWHERE}/"]


def test_warm_up_requests_get_through_a_locked_origin() -> None:
    backend = _backend(origin_lock="all", origin_secret=SECRET)
    app = backend.app()
    assert _snapstart.warm_up(Mangum(app, lifespan="off"), backend, app) == [200, 404, 404, 404]


def test_warm_up_requests_are_refused_by_access_control_before_the_store() -> None:
    backend = _backend(auth=True, auth_secret="k" * 32)
    app = backend.app()
    assert _snapstart.warm_up(Mangum(app, lifespan="off"), backend, app) == [200, 401, 401, 401]


def test_after_restore_reseeds_random() -> None:
    """Instances restored from one snapshot start with one `random` state: botocore's retry
    jitter would be the same in all of them without a new seed."""
    backend = _backend()
    draws = []
    for _ in range(2):
        random.seed(1234)  # the state every restored instance starts from
        _snapstart.after_restore(backend)
        draws.append([random.random() for _ in range(4)])
    assert draws[0] != draws[1]


class _Client:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def counted_backend() -> Iterator[Backend]:
    backend = _backend()
    backend.dynamodb, backend.s3 = _Client(), _Client()
    yield backend


@pytest.mark.parametrize("hook", [_snapstart.before_snapshot, _snapstart.after_restore])
def test_hooks_close_pooled_connections(counted_backend: Backend, hook: Any) -> None:
    provider = _Provider("value")
    stored = _stored(provider)
    hook(counted_backend)
    assert (counted_backend.dynamodb.closed, counted_backend.s3.closed) == (1, 1)
    assert provider.closed == 1
    del stored


def test_the_s3_client_is_made_on_first_use_and_before_the_snapshot() -> None:
    """A cold start without SnapStart does not load S3's model (most requests never call S3);
    the snapshot holds the client made, so no restored instance pays for it."""
    backend = _backend()
    assert not backend.s3.made
    _snapstart.after_restore(backend)  # closing what was never made does not make it
    assert not backend.s3.made
    _snapstart.before_snapshot(backend)
    assert backend.s3.made
    assert backend.s3.meta.service_model.service_name == "s3"


def test_closed_clients_still_answer() -> None:
    """`close` empties botocore's connection pools; the client opens a new connection on its
    next request (here: tries to, and is stopped before sending)."""
    backend = _backend()
    _snapstart.before_snapshot(backend)
    calls: list[str] = []

    def record(request: Any, **_: Any) -> None:
        calls.append(request.url)
        raise RuntimeError("stop here")

    backend.dynamodb.meta.events.register("before-send", record)
    with pytest.raises(RuntimeError, match="stop here"):
        backend.dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "b"}})
    assert calls


def test_after_restore_expires_stored_keys(counted_backend: Backend) -> None:
    """A key set or origin secret read at init is read again on first use after a restore
    (rotated or revoked since the snapshot, it must not be trusted for another max-age)."""
    provider = _Provider("at init", "after restore")
    stored = _stored(provider)
    assert stored.current() == "at init"
    assert stored.current() == "at init" and provider.fetched == 1  # cached for max-age
    _snapstart.after_restore(counted_backend)
    assert stored.current() == "after restore" and provider.fetched == 2


def test_expired_value_kept_when_it_cannot_be_read_again(counted_backend: Backend) -> None:
    provider = _Provider("at init")
    stored = _stored(provider)
    stored.current()

    def unavailable(name: str, **_: Any) -> str:
        raise OSError("no network yet")

    provider.get = unavailable  # type: ignore[method-assign]
    _snapstart.after_restore(counted_backend)
    assert stored.current() == "at init"


def test_hooks_are_registered_where_the_runtime_provides_the_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registered: list[tuple[str, Any, tuple[Any, ...]]] = []
    library = types.ModuleType("snapshot_restore_py")
    library.register_before_snapshot = lambda f, *a: registered.append(("before", f, a))  # type: ignore[attr-defined]
    library.register_after_restore = lambda f, *a: registered.append(("after", f, a))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", library)
    backend = _backend()
    assert _snapstart.register_hooks(backend) is True
    assert registered == [
        ("before", _snapstart.before_snapshot, (backend,)),
        ("after", _snapstart.after_restore, (backend,)),
    ]


def test_without_the_library_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails
    assert _snapstart.register_hooks(_backend()) is False
