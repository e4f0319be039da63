"""Settings: DS_ environment variables, and the SSE mode chosen inside Lambda."""

from __future__ import annotations

import pytest

from core.config import Settings


def test_settings_come_from_ds_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS_LONG_POLL_TIMEOUT", "2.5")
    monkeypatch.setenv("DS_MAX_APPEND_BYTES", "1000")
    monkeypatch.setenv("DS_TABLE", "t")
    settings = Settings()
    assert (settings.long_poll_timeout, settings.max_append_bytes, settings.table) == (
        2.5,
        1000,
        "t",
    )


def test_sse_streams_outside_lambda_and_uses_windows_inside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    assert Settings().sse_mode == "stream"
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "api")
    assert Settings().sse_mode == "window"
    monkeypatch.setenv("DS_SSE_MODE", "stream")
    assert Settings().sse_mode == "stream"


def test_invalid_settings_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS_POLL_INTERVAL", "0")
    with pytest.raises(ValueError):
        Settings()
