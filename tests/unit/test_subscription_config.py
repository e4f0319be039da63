"""Parsing subscription configurations, and the hash that decides re-confirmation."""

from __future__ import annotations

import json

import pytest

from durable_streams_aws.core.subscriptions import (
    Delivery,
    SubscriptionError,
    config_hash,
    parse_config,
)
from durable_streams_aws.core.subscriptions.config import parse_subscription_id


def parse(document: object, *, local: bool = False):
    return parse_config(json.dumps(document).encode(), allow_local_http=local)


WEBHOOK = {"type": "webhook", "pattern": "events/*", "webhook": {"url": "https://h.example/x"}}


def test_a_webhook_config_with_its_defaults() -> None:
    config = parse(WEBHOOK)
    assert config.delivery is Delivery.WEBHOOK
    assert config.lease_ttl_ms == 30_000 and config.streams == () and config.wake_stream is None


def test_explicit_streams_are_sorted_and_deduplicated_and_a_pull_wake_needs_its_stream() -> None:
    config = parse({"type": "pull-wake", "streams": ["b", "a", "b"], "wake_stream": "wake/pool"})
    assert config.streams == ("a", "b") and config.wake_stream == "wake/pool"


def test_equal_configurations_hash_equal_whatever_their_spelling() -> None:
    spelled = {**WEBHOOK, "streams": ["x", "y"], "lease_ttl_ms": 30_000}
    respelled = {**WEBHOOK, "streams": ["y", "x", "y"]}
    assert config_hash(parse(spelled)) == config_hash(parse(respelled))
    for change in (
        {"pattern": "events/**"},
        {"lease_ttl_ms": 1000},
        {"description": "d"},
        {"webhook": {"url": "https://h.example/y"}},
        {"streams": ["x"]},
    ):
        assert config_hash(parse({**WEBHOOK, **change})) != config_hash(parse(WEBHOOK))


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"type": "webhook"},  # neither pattern nor streams
        {**WEBHOOK, "type": "push"},
        {**WEBHOOK, "lease_ttl_ms": 999},
        {**WEBHOOK, "lease_ttl_ms": 600_001},
        {**WEBHOOK, "lease_ttl_ms": 1.5},
        {**WEBHOOK, "lease_ttl_ms": True},
        {**WEBHOOK, "pattern": 3},
        {**WEBHOOK, "pattern": "/events"},
        {**WEBHOOK, "streams": "a"},
        {**WEBHOOK, "streams": ["__ds/x"]},  # reserved
        {**WEBHOOK, "streams": ["a/../b"]},
        {**WEBHOOK, "webhook": None},
        {**WEBHOOK, "webhook": {"url": "https://h.example", "secret": "s"}},
        {**WEBHOOK, "wake_stream": "w"},  # only for pull-wake
        {**WEBHOOK, "description": 5},
        {**WEBHOOK, "extra": 1},
        {"type": "pull-wake", "pattern": "a/*"},  # no wake stream
        {"type": "pull-wake", "pattern": "a/*", "wake_stream": "w", "webhook": {"url": "x"}},
    ],
)
def test_invalid_configurations_are_refused_with_400(document: object) -> None:
    with pytest.raises(SubscriptionError) as refused:
        parse(document)
    assert refused.value.status == 400 and refused.value.code == "INVALID_REQUEST"


def test_bodies_that_are_not_json_objects_are_refused() -> None:
    for body in (b"", b"{", b"\xff", b"null", b"[1]"):
        with pytest.raises(SubscriptionError) as refused:
            parse_config(body, allow_local_http=False)
        assert refused.value.status == 400


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://10.0.0.1/hook", True),
        ("http://127.0.0.1:9/hook", False),  # the development exception is off
        ("https://169.254.169.254/latest", False),
        ("ftp://h.example/x", False),
    ],
)
def test_unsafe_webhook_urls_are_refused_with_their_code(url: str, local: bool) -> None:
    with pytest.raises(SubscriptionError) as refused:
        parse({**WEBHOOK, "webhook": {"url": url}}, local=local)
    assert refused.value.status == 400 and refused.value.code == "WEBHOOK_URL_REJECTED"


def test_localhost_webhooks_are_accepted_in_development() -> None:
    config = parse({**WEBHOOK, "webhook": {"url": "http://127.0.0.1:9/hook"}}, local=True)
    assert config.webhook_url == "http://127.0.0.1:9/hook"


@pytest.mark.parametrize("value", ["", "a/b", "x" * 257, "tab\there"])
def test_subscription_ids_must_be_one_segment_of_reasonable_size(value: str) -> None:
    with pytest.raises(SubscriptionError):
        parse_subscription_id(value)
