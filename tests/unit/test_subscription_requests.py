"""Parsing the control API's wake-request and stream-list bodies: the values the subscription
service takes, and the 400s a malformed request gets before it is called."""

from __future__ import annotations

import json

import pytest

from durable_streams_aws.core.http.subscription_requests import (
    bearer_token,
    parse_added_streams,
    parse_completion,
    parse_fence,
    parse_worker,
)
from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.core.subscriptions import Ack, Completion, SubscriptionError, WakeFence


def refusal(parse: object, *args: object) -> SubscriptionError:
    with pytest.raises(SubscriptionError) as refused:
        parse(*args)  # type: ignore[operator]
    assert refused.value.status == 400 and refused.value.code == "INVALID_REQUEST"
    return refused.value


def test_added_streams_are_the_only_field() -> None:
    assert parse_added_streams(b'{"streams": ["b/1", "a/2"]}') == ("a/2", "b/1")
    assert "the body must be" in refusal(parse_added_streams, b'{"streams": [], "x": 1}').message
    refusal(parse_added_streams, b"[]")
    refusal(parse_added_streams, b"not json")


def test_a_worker_is_a_name_of_1_to_256_characters() -> None:
    assert parse_worker(b'{"worker": "w1"}') == "w1"
    assert parse_worker(json.dumps({"worker": "x" * 256}).encode()) == "x" * 256
    for worker in ["", "x" * 257, 7, None, "\ud800"]:
        body = json.dumps({"worker": worker}).encode()
        message = refusal(parse_worker, body).message
        assert message == "worker must be a name of 1 to 256 characters"


def test_a_bearer_token_is_taken_from_its_header_whatever_the_scheme_case() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Bearer") == ""
    assert bearer_token("Basic abc") is None
    assert bearer_token(None) is None


def test_the_fence_is_kept_as_sent() -> None:
    assert parse_fence({"generation": True, "wake_id": 3}) == WakeFence(True, 3)
    assert parse_fence({}) == WakeFence(None, None)


def test_a_completion_has_done_and_acks_at_exact_or_plain_offsets() -> None:
    document = {
        "done": True,
        "acks": [
            {"stream": "a/1", "offset": format_offset(5)},
            {"stream": "a/2", "offset": format_offset(7, inside=True)},
        ],
    }
    assert parse_completion(document) == Completion(True, (Ack("a/1", 5), Ack("a/2", 7, True)))
    assert parse_completion({}) == Completion(False, ())


def test_a_malformed_completion_is_refused() -> None:
    assert refusal(parse_completion, {"done": 1}).message == "done must be true or false"
    refusal(parse_completion, {"acks": {}})
    refusal(parse_completion, {"acks": [{"stream": "a/1", "offset": "not-an-offset"}]})
    many = [{"stream": f"a/{i}", "offset": format_offset(1)} for i in range(100)]
    assert refusal(parse_completion, {"acks": many}).message == "at most 99 acks per request"
    assert len(parse_completion({"acks": many[:99]}).acks) == 99
