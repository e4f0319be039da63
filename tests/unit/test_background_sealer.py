"""`dsaws serve`'s background sealer waiting for a quiet server, and the request clock it
waits on (against the real sealer: `tests/integration/test_seal_entry_points.py`)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from durable_streams_aws.core.http.middleware import RequestActivity
from durable_streams_aws.core.storage.background import BackgroundSealer, BackgroundSweep, QuietWait


class _Report:
    segments_written = 0

    def as_dict(self) -> dict[str, Any]:
        return {}


class _CountingSealer:
    def __init__(self) -> None:
        self.runs: list[float] = []
        self.ran = threading.Event()

    def run(self) -> _Report:
        self.runs.append(time.monotonic())
        self.ran.set()
        return _Report()


def _start(quiet: QuietWait | None) -> tuple[BackgroundSealer, _CountingSealer, float]:
    counting = _CountingSealer()
    sealing = BackgroundSealer(counting, 0.01, quiet)  # type: ignore[arg-type]
    return sealing.start(), counting, time.monotonic()


def test_without_a_quiet_wait_a_sweep_runs_on_every_interval() -> None:
    sealing, counting, _ = _start(None)
    assert counting.ran.wait(5)
    sealing.stop()


def test_a_busy_server_puts_a_sweep_off_until_the_longest_wait() -> None:
    sealing, counting, started = _start(QuietWait(lambda: 0.0, seconds=10, longest=0.3))
    try:
        assert counting.ran.wait(5)
        assert counting.runs[0] - started >= 0.3
    finally:
        sealing.stop()


def test_a_quiet_server_is_swept_without_waiting() -> None:
    sealing, counting, started = _start(QuietWait(lambda: 60.0, seconds=1, longest=30))
    try:
        assert counting.ran.wait(5)
        assert counting.runs[0] - started < 1  # not the quiet second, nor the longest wait
    finally:
        sealing.stop()


def test_stopping_ends_a_wait_at_once_and_sweeps_nothing() -> None:
    sealing, counting, _ = _start(QuietWait(lambda: 0.0, seconds=10, longest=30))
    time.sleep(0.1)
    stopped = time.monotonic()
    sealing.stop()
    assert time.monotonic() - stopped < 1
    assert counting.runs == []


def test_the_clock_counts_a_request_at_its_start_and_its_end_only() -> None:
    activity = RequestActivity()
    seen_at_start: list[float] = []
    seen_during: list[float] = []

    async def waits(scope: Any, receive: Any, send: Any) -> None:
        seen_at_start.append(activity.idle_for())
        await asyncio.sleep(0.3)  # as a long-poll does
        seen_during.append(activity.idle_for())

    time.sleep(0.2)
    assert activity.idle_for() >= 0.2
    asyncio.run(activity.around(waits)({"type": "http"}, None, None))
    assert seen_at_start[0] < 0.1  # the start is
    assert seen_during[0] >= 0.3  # waiting is not activity
    assert activity.idle_for() < 0.1  # the end is
    asyncio.run(activity.around(waits)({"type": "lifespan"}, None, None))
    assert activity.idle_for() >= 0.3  # nor is anything but a request


def test_the_clock_counts_a_response_sending_its_body_as_work() -> None:
    activity = RequestActivity()
    idle_while_sending: list[float] = []

    async def streams(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(4):  # as an SSE catch-up does, in one long request
            await asyncio.sleep(0.1)
            await send({"type": "http.response.body", "body": b"data", "more_body": True})
            idle_while_sending.append(activity.idle_for())
        await send({"type": "http.response.body", "body": b""})

    async def sent(message: Any) -> None:
        pass

    asyncio.run(activity.around(streams)({"type": "http"}, None, sent))
    assert max(idle_while_sending) < 0.05


class _Sweep:
    """Reports work on some runs, fails on others."""

    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = outcomes
        self.done = threading.Event()

    def __call__(self) -> Any:
        outcome = self.outcomes.pop(0) if self.outcomes else "idle"
        if not self.outcomes:
            self.done.set()
        if outcome == "fail":
            raise RuntimeError("a sweep that failed")
        removed = 1 if outcome == "work" else 0

        class Report:
            def as_dict(self) -> dict[str, int]:
                return {"removed": removed}

        return Report()


def test_what_follows_a_sweep_runs_only_after_one_that_did_something() -> None:
    """The collector's sweep is followed by the journal's compaction check, but only when it
    removed something; a failed sweep is logged and the next one runs."""
    sweep = _Sweep(["idle", "work", "fail", "idle", "work", "idle"])
    followed: list[int] = []
    background = BackgroundSweep("test", sweep, 0.01, after=lambda: followed.append(1))
    background.start()
    try:
        assert sweep.done.wait(5)
        time.sleep(0.05)
    finally:
        background.stop()
    assert followed == [1, 1]
