"""Settings: DS_ environment variables, the SSE mode chosen inside Lambda, and settings that
cannot work refused at start with a readable message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from durable_streams_aws.core.config import (
    AuthSettings,
    CorsSettings,
    KeySettings,
    LiveReads,
    OriginLockSettings,
    Settings,
    SettingsError,
    SizeLimits,
    SubscriptionSettings,
    load_settings,
)
from durable_streams_aws.core.protocol.caching import CacheRules

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def in_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "api")
    monkeypatch.setenv("DS_FUNCTION_TIMEOUT", "30")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DS_") or name == "AWS_LAMBDA_FUNCTION_NAME":
            monkeypatch.delenv(name)


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


def test_components_are_given_typed_views_of_the_settings() -> None:
    settings = Settings(
        base_path="/s",
        max_append_bytes=10,
        max_read_bytes=20,
        max_read_from_start_bytes=30,
        max_response_bytes=40_000,
        max_bounded_read_bytes=50,
        poll_interval=0.5,
        long_poll_timeout=7,
        sse_lifetime=9,
        cache_max_age=3,
        origin_lock="reads",
        origin_secret="a" * 16,
        auth_keys_max_age=11,
        cors_origins="https://a.example, https://b.example",
    )
    streams = settings.stream_settings
    assert streams.base_path == "/s"
    assert streams.limits == SizeLimits(10, 20, 30, 40_000, 50)
    assert streams.live == LiveReads(0.5, 7, sse_window=False, sse_seconds=9)
    assert streams.cache_rules == CacheRules("public", 3, 300, 1, 7)
    assert settings.origin_lock_settings == OriginLockSettings("reads", "a" * 16, None, 11)
    assert settings.cors == CorsSettings(("https://a.example", "https://b.example"))
    assert not settings.cors.any_origin and Settings().cors.any_origin


def test_access_control_and_subscriptions_get_views_of_their_own() -> None:
    settings = Settings(
        auth=True,
        auth_secret_id="keys",
        auth_audience="aud",
        auth_issuer="https://issuer.example",
        auth_claim="grants",
        auth_keys_max_age=12,
        auth_max_lifetime=3600,
        public_read_prefixes="news/, *",
        region="eu-west-1",
        subscription_queue_url="https://sqs.example/q",
        subscription_sweep_seconds=2,
        webhook_secret="text",
        webhook_allow_localhost=False,
    )
    keys = KeySettings(None, "keys", None, 12)
    assert settings.auth_settings == AuthSettings(
        ("news/", ""), "aud", "https://issuer.example", "grants", None, 3600, keys
    )
    assert keys.configured and not Settings().key_settings.configured
    assert settings.subscription_settings == SubscriptionSettings(
        "eu-west-1", "https://sqs.example/q", 2, "text", None, False
    )


@pytest.mark.parametrize(
    ("long_poll_timeout", "stale"), [(0.2, 1), (1, 1), (1.5, 2), (15, 15), (25, 25), (0, 0)]
)
def test_a_timeout_is_served_stale_as_long_as_a_long_poll_lasts(
    long_poll_timeout: float, stale: int
) -> None:
    # A cache that refreshes an expired 204 makes a long-poll of its own, which may wait the
    # whole timeout; the stale copy covers the readers that arrive meanwhile.
    rules = Settings(long_poll_timeout=long_poll_timeout).cache_rules
    assert rules.timeout_stale_while_revalidate == stale
    chosen = Settings(long_poll_timeout=long_poll_timeout, cache_timeout_stale_while_revalidate=3)
    assert chosen.cache_rules.timeout_stale_while_revalidate == 3


def test_the_timeout_allowance_comes_from_its_ds_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS_CACHE_TIMEOUT_STALE_WHILE_REVALIDATE", "4")
    assert load_settings().cache_rules.timeout_stale_while_revalidate == 4


def test_an_sse_window_lasts_the_window_setting_or_a_long_poll() -> None:
    windowed = Settings(sse_mode="window", long_poll_timeout=4, sse_lifetime=60)
    assert windowed.stream_settings.live == LiveReads(0.2, 4, sse_window=True, sse_seconds=4)
    assert Settings(sse_mode="window", sse_window=2).stream_settings.live.sse_seconds == 2


def test_sse_streams_outside_lambda_and_uses_windows_inside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().sse_mode == "stream"
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "api")
    assert Settings().sse_mode == "window"


def test_the_template_defaults_are_accepted_inside_lambda(
    in_lambda: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "DS_LONG_POLL_TIMEOUT": "25",  # the template's largest allowed value
        "DS_MAX_READ_BYTES": str(4 * 1024 * 1024),
        "DS_MAX_APPEND_BYTES": str(4 * 1024 * 1024),
    }.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.sse_mode == "window" and settings.sse_window_seconds == 25


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"DS_SSE_MODE": "stream"}, "DS_SSE_MODE=stream cannot work inside Lambda"),
        ({"DS_LONG_POLL_TIMEOUT": "26"}, "DS_LONG_POLL_TIMEOUT=26 s must end 5 s before"),
        ({"DS_SSE_WINDOW": "28"}, "DS_SSE_WINDOW=28 s"),
        ({"DS_WRITE_DEADLINE": "40"}, "DS_WRITE_DEADLINE=40 s"),
        ({"DS_MAX_APPEND_BYTES": str(5 * 1024 * 1024)}, "DS_MAX_APPEND_BYTES=5242880"),
        ({"DS_MAX_RESPONSE_BYTES": "7000000"}, "DS_MAX_RESPONSE_BYTES=7000000"),
    ],
)
def test_settings_that_cannot_work_inside_lambda_are_refused(
    in_lambda: None, monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], named: str
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert named in str(refused.value)
    assert "\n" not in str(refused.value)


def test_every_problem_is_named_at_once(in_lambda: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS_SSE_MODE", "stream")
    monkeypatch.setenv("DS_LONG_POLL_TIMEOUT", "60")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert "DS_SSE_MODE" in str(refused.value) and "DS_LONG_POLL_TIMEOUT" in str(refused.value)


def test_outside_lambda_only_a_given_function_timeout_bounds_the_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DS_SSE_LIFETIME", "600")
    monkeypatch.setenv("DS_MAX_RESPONSE_BYTES", "50000000")
    assert load_settings().sse_lifetime == 600
    monkeypatch.setenv("DS_FUNCTION_TIMEOUT", "60")
    with pytest.raises(SettingsError, match="DS_SSE_LIFETIME=600"):
        load_settings()


def test_malformed_values_are_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS_POLL_INTERVAL", "0")
    with pytest.raises(SettingsError, match="DS_POLL_INTERVAL"):
        load_settings()


def test_dsaws_serve_refuses_to_start_with_a_clear_message() -> None:
    env = {**os.environ, "DS_LONG_POLL_TIMEOUT": "50", "DS_FUNCTION_TIMEOUT": "30"}
    run = subprocess.run(
        [sys.executable, "-m", "durable_streams_aws.core.cli", "serve", "--port", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("dsaws: invalid settings: DS_LONG_POLL_TIMEOUT=50 s")
    assert "Traceback" not in run.stderr


def test_the_api_function_fails_its_initialisation_with_the_reason() -> None:
    env = {
        **os.environ,
        "AWS_LAMBDA_FUNCTION_NAME": "api",
        "AWS_DEFAULT_REGION": "us-east-1",
        "DS_SSE_MODE": "stream",
    }
    run = subprocess.run(
        [sys.executable, "-c", "import durable_streams_aws.functions.api"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "SettingsError: invalid settings: DS_SSE_MODE=stream cannot work inside Lambda" in (
        run.stderr
    )


def test_the_api_function_collects_garbage_again_once_initialised() -> None:
    """The init pauses the garbage collector (functions/api.py says why): it must be running
    again afterwards, with what the init made frozen."""
    env = {
        **os.environ,
        "AWS_LAMBDA_FUNCTION_NAME": "api",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "unused",
        "AWS_SECRET_ACCESS_KEY": "unused",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # the warm-up answers in-process
        "DS_TABLE": "t",
        "DS_BUCKET": "b",
    }
    check = (
        "import gc, durable_streams_aws.functions.api;"
        " print(gc.isenabled(), gc.get_freeze_count() > 10_000)"
    )
    run = subprocess.run(
        [sys.executable, "-c", check],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]
