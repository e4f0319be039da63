"""What to do after each attempt at a request: accept the answer, try again after a pause, or
give up with an error that says what is known. Pure, shared by the sync and async clients."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ._errors import DurableStreamError, OutcomeUnknown, Unavailable
from ._retry import RETRYABLE_STATUSES, RetryPolicy
from ._wire import Request


@dataclass(frozen=True)
class Next:
    pause: float | None = None  # try again after this many seconds
    error: DurableStreamError | None = None  # give up with this

    @property
    def accept(self) -> bool:
        return self.pause is None and self.error is None


ACCEPT = Next()


def after_answer(
    policy: RetryPolicy, request: Request, attempt: int, response: httpx.Response
) -> Next:
    status = response.status_code
    # 429 refuses a request before doing anything: even a write may go again.
    may_repeat = request.repeatable or status == 429
    if status in RETRYABLE_STATUSES and may_repeat and policy.may_retry(attempt):
        return Next(pause=policy.delay(attempt, response.headers.get("Retry-After")))
    if status >= 500 and not request.repeatable:
        message = f"{request.method} answered {status}: the write may have been applied"
        return Next(error=OutcomeUnknown(message, status))
    return ACCEPT


def after_failure(
    policy: RetryPolicy, request: Request, attempt: int, failure: httpx.TransportError
) -> Next:
    # A connection never made cannot have delivered anything: always safe to try again.
    delivered_maybe = not isinstance(failure, httpx.ConnectError)
    if delivered_maybe and not request.repeatable:
        return Next(error=OutcomeUnknown(f"{request.method} got no answer: {failure}"))
    if policy.may_retry(attempt):
        return Next(pause=policy.delay(attempt))
    return Next(error=Unavailable(f"no answer after {attempt} tries: {failure}"))
