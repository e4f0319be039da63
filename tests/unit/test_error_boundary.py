"""A handler that fails unexpectedly is answered inside the app's middleware: a JSON 500 that
carries the request id and the default headers, counted by the request metrics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from starlette.testclient import TestClient

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.telemetry import Metric


class BrokenStore:
    """Every call fails as a bug would."""

    def __getattr__(self, name: str) -> Any:
        def fail(*_: object, **__: object) -> None:
            raise RuntimeError(f"{name} is broken")

        return fail


class Figures:
    def __init__(self) -> None:
        self.seen: list[tuple[Metric, float]] = []

    def count(self, metric: Metric, value: float = 1) -> None:
        self.seen.append((metric, value))

    def count_by(self, metric: Metric, dimensions: Mapping[str, str], value: float = 1) -> None:
        self.seen.append((metric, value))


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST"])
def test_an_unexpected_failure_is_a_500_with_a_request_id(
    method: str, caplog: pytest.LogCaptureFixture
) -> None:
    figures = Figures()
    app = create_app(Settings(subscriptions=False), BrokenStore(), figures)  # type: ignore[arg-type]
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.request(
            method, "/v1/stream/s", content=b"x", headers={"Content-Type": "text/plain"}
        )
    assert answer.status_code == 500
    assert len(answer.headers["x-request-id"]) == 32
    assert answer.headers["content-security-policy"].startswith("sandbox")
    assert answer.headers["cache-control"] == "no-store"
    if method == "HEAD":
        assert answer.content == b""
    else:
        assert answer.json()["error"] == "internal"
    assert any(metric.value.endswith("Latency") for metric, _ in figures.seen)
    assert "is broken" in caplog.text  # logged with its traceback
