"""What to do after each attempt at a request: accept the answer, try again after a pause, check
the stream before trying again, or give up with an error that says what is known. Pure, shared
by the sync and async clients.

A plain append is not idempotent, so it is sent again only when the server cannot have applied
it: the connection was never made, the server refused it before doing anything (429, or 503
with Retry-After), or it answered 500 (or 503 without Retry-After) and the stream's tail is
still where this client last saw it before sending (checked with a HEAD: an applied append
would have moved the tail). Anything else after the request may have reached the server (502,
504, a lost answer, a tail that moved or could not be read) raises `OutcomeUnknown`.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ._errors import DurableStreamError, OutcomeUnknown, Unavailable
from ._retry import RETRYABLE_STATUSES, RetryPolicy
from ._wire import Request, StreamInfo, describe

# Answers after which a write may be sent again if the stream's tail has not moved: the server
# itself answered, so it is done with the request. Not 502 or 504: a gateway that gave up
# waiting may leave the request still in progress behind it.
CHECKABLE = frozenset({500, 503})


@dataclass(frozen=True)
class Next:
    pause: float | None = None  # try again after this many seconds
    error: DurableStreamError | None = None  # give up with this
    # Ask the stream's tail (HEAD) and decide with `after_check` before trying again.
    verify: bool = False

    @property
    def accept(self) -> bool:
        return self.pause is None and self.error is None and not self.verify


ACCEPT = Next()


def refused_before_acting(response: httpx.Response) -> bool:
    """429 refuses a request before doing anything; so does a 503 that says when to come back
    (a gateway's 503 after losing its upstream carries no Retry-After, and may come after the
    server acted)."""
    status = response.status_code
    return status == 429 or (status == 503 and "Retry-After" in response.headers)


def after_answer(
    policy: RetryPolicy, request: Request, attempt: int, response: httpx.Response
) -> Next:
    status = response.status_code
    may_repeat = request.repeatable or refused_before_acting(response)
    if status in RETRYABLE_STATUSES and may_repeat and policy.may_retry(attempt):
        return Next(pause=policy.delay(attempt, response.headers.get("Retry-After")))
    known_tail = request.tail_before is not None
    if status in CHECKABLE and not may_repeat and known_tail and policy.may_retry(attempt):
        return Next(verify=True)
    if status >= 500 and not may_repeat:
        message = f"{describe(response)} answered {status}: the write may have been applied" + (
            "" if known_tail else " (the stream's tail was not known)"
        )
        return Next(error=OutcomeUnknown(message, status))
    return ACCEPT


def after_check(
    policy: RetryPolicy, request: Request, attempt: int, url: str, info: StreamInfo
) -> Next:
    """After a 500 or 503 to a write, whether the stream's state says sending it again is
    safe."""
    if info.next_offset == request.tail_before and not info.closed:
        return Next(pause=policy.delay(attempt))
    return Next(
        error=OutcomeUnknown(
            f"{request.method} {url} failed and the stream's tail moved from "
            f"{request.tail_before} to {info.next_offset}"
            f"{' (now closed)' if info.closed else ''}: the write may have been applied"
        )
    )


def after_failure(
    policy: RetryPolicy, request: Request, attempt: int, failure: httpx.TransportError
) -> Next:
    where = _target(request, failure)
    # A connection never made cannot have delivered anything: always safe to try again.
    delivered_maybe = not isinstance(failure, httpx.ConnectError)
    if delivered_maybe and not request.repeatable:
        return Next(error=OutcomeUnknown(f"{where} got no answer: {failure}"))
    if policy.may_retry(attempt):
        return Next(pause=policy.delay(attempt))
    return Next(error=Unavailable(f"{where}: no answer after {attempt} tries: {failure}"))


def _target(request: Request, failure: httpx.TransportError) -> str:
    try:
        url = failure.request.url.copy_with(query=None)
    except RuntimeError:
        return request.method
    return f"{request.method} {url}"
