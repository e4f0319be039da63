"""Scripted servers for the client's tests: an httpx.MockTransport that answers each request
with the next step given, and keeps the requests for the test to look at."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from durable_streams_aws.client import RetryPolicy

# Retries without waiting, so that a test of the retry bound takes no time.
FAST = RetryPolicy(max_attempts=4, base_delay=0.0, max_delay=0.01)
Step = Callable[[httpx.Request], httpx.Response]


def offset(position: int) -> str:
    """An offset token of this server's form, at byte `position`."""
    return f"{0:016d}_{position:016d}"


def scripted(*steps: Step) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering the n-th request with the n-th step, and the requests it saw."""
    seen: list[httpx.Request] = []
    queue = list(steps)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)(request)

    return httpx.MockTransport(handle), seen
