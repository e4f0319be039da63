"""The bounded optimistic write: a lost race is tried again, a race lost without end is
given up on with an error the HTTP layer answers 503."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.storage import StoreUnavailable
from durable_streams_aws.core.storage.aws import Conflict
from durable_streams_aws.core.subscriptions._retry import (
    ATTEMPTS,
    WriteContention,
    retry_on_conflict,
)


class Attempts:
    """An attempt that loses its race `conflicts` times, then answers "written"."""

    def __init__(self, conflicts: int) -> None:
        self.conflicts = conflicts
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.conflicts:
            raise Conflict("lost a race")
        return "written"


def test_a_conflict_then_a_success_is_tried_again() -> None:
    attempt = Attempts(conflicts=1)
    assert retry_on_conflict(attempt) == "written"
    assert attempt.calls == 2


def test_a_first_success_is_tried_once() -> None:
    attempt = Attempts(conflicts=0)
    assert retry_on_conflict(attempt, attempts=1) == "written"
    assert attempt.calls == 1


def test_the_last_allowed_attempt_may_still_win() -> None:
    attempt = Attempts(conflicts=ATTEMPTS - 1)
    assert retry_on_conflict(attempt) == "written"
    assert attempt.calls == ATTEMPTS


def test_it_gives_up_after_the_bound_with_a_store_unavailable() -> None:
    attempt = Attempts(conflicts=1_000)
    with pytest.raises(WriteContention) as given_up:
        retry_on_conflict(attempt, attempts=5)
    assert attempt.calls == 5
    assert given_up.value.attempts == 5
    assert isinstance(given_up.value, StoreUnavailable)  # answered 503, Retry-After
    assert given_up.value.retry_after >= 1
    assert "5 times" in str(given_up.value)


def test_the_default_bound_is_generous_and_finite() -> None:
    attempt = Attempts(conflicts=10_000)
    with pytest.raises(WriteContention):
        retry_on_conflict(attempt)
    assert attempt.calls == ATTEMPTS >= 32


def test_other_errors_are_not_retried() -> None:
    calls = []

    def attempt() -> None:
        calls.append(1)
        raise StoreUnavailable("throttled")

    with pytest.raises(StoreUnavailable):
        retry_on_conflict(attempt)
    assert len(calls) == 1


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        retry_on_conflict(Attempts(0), attempts=0)
