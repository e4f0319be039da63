"""`dsaws serve`'s background sweeps take turns with the requests (`core.storage.lockstep`):
a sweep's turn at the embedded emulator never starts while a request is being worked on, and
the event loop stands still while the turn's step runs. Counted, not timed: undoing the
lockstep (a sweep's thread calling the emulator whenever it likes) makes turns start inside
requests, which these tests count."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from durable_streams_aws.core.http.middleware import RequestActivity
from durable_streams_aws.core.storage.lockstep import Lockstep


class _Sweep:
    """A sweep's thread: `turns` calls, each noting how many requests were in flight as it
    began (its step is the time until the next call)."""

    def __init__(self, lockstep: Lockstep, activity: RequestActivity, turns: int) -> None:
        self.lockstep = lockstep
        self.activity = activity
        self.turns = turns
        self.in_flight_at_turns: list[int] = []
        self.loop_ran_during_steps = 0
        self.thread = threading.Thread(target=self._run, name="sweep")

    def _run(self) -> None:
        self.lockstep.enrol()
        with self.lockstep.sweep():
            for _ in range(self.turns):
                self.lockstep.before_turn()
                self.in_flight_at_turns.append(self.activity.in_flight)
                ticks = _Ticks.count
                time.sleep(0.001)  # the step: the event loop must not run meanwhile
                self.loop_ran_during_steps += _Ticks.count != ticks


class _Ticks:
    count = 0


async def _ticking(stop: asyncio.Event) -> None:
    """The event loop's own work: a tick whenever it runs."""
    while not stop.is_set():
        _Ticks.count += 1
        await asyncio.sleep(0)


async def _serve_requests(activity: RequestActivity, count: int, seconds: float) -> None:
    """`count` requests one after another, each worked on for `seconds` (as an append is)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        time.sleep(seconds / 2)  # work that holds the event loop
        await asyncio.sleep(seconds / 2)  # and a wait inside the request

    served = activity.around(app)
    for _ in range(count):
        await served({"type": "http"}, None, None)
        await asyncio.sleep(0.0005)  # the client's turn before the next request


def _run(lockstep: Lockstep, activity: RequestActivity, turns: int, requests: int) -> _Sweep:
    sweep = _Sweep(lockstep, activity, turns)

    async def main() -> None:
        await _serve_requests(activity, 1, 0)  # the first request tells where the loop is
        stop = asyncio.Event()
        ticking = asyncio.create_task(_ticking(stop))
        sweep.thread.start()
        await _serve_requests(activity, requests, 0.004)
        while sweep.thread.is_alive():
            await asyncio.sleep(0.001)
        stop.set()
        await ticking

    asyncio.run(main())
    return sweep


def test_a_sweep_takes_no_turn_while_a_request_is_worked_on() -> None:
    activity = RequestActivity()
    # Patience and the longest wait far beyond the run: only quiet moments give turns.
    lockstep = Lockstep(activity, patience=60, longest=60, step_wait=1)
    sweep = _run(lockstep, activity, turns=200, requests=100)
    assert len(sweep.in_flight_at_turns) == 200
    assert set(sweep.in_flight_at_turns) == {0}
    assert lockstep.turns == 200
    assert lockstep.deferred > 0  # some turns did wait for a request to end


def test_the_event_loop_stands_still_while_a_turn_s_step_runs() -> None:
    activity = RequestActivity()
    lockstep = Lockstep(activity, patience=60, longest=60, step_wait=1)
    sweep = _run(lockstep, activity, turns=100, requests=20)
    assert sweep.loop_ran_during_steps == 0


def test_under_requests_back_to_back_a_sweep_still_gets_a_turn_every_longest_wait() -> None:
    activity = RequestActivity()
    lockstep = Lockstep(activity, patience=60, longest=0.01, step_wait=1)
    sweep = _Sweep(lockstep, activity, turns=5)

    async def main() -> None:
        await _serve_requests(activity, 1, 0)
        done = asyncio.Event()

        async def busy(scope: Any, receive: Any, send: Any) -> None:
            await done.wait()  # one request in flight, worked on, all along

        request = asyncio.create_task(activity.around(busy)({"type": "http"}, None, None))
        await asyncio.sleep(0)
        activity._last = time.monotonic() + 3600  # it keeps working for an hour
        sweep.thread.start()
        while sweep.thread.is_alive():
            await asyncio.sleep(0.001)
        done.set()
        await request

    asyncio.run(main())
    assert sweep.in_flight_at_turns == [1] * 5


def test_threads_that_did_not_enrol_never_wait() -> None:
    activity = RequestActivity()
    activity.loop = asyncio.new_event_loop()  # a loop that never runs: nobody would grant
    try:
        lockstep = Lockstep(activity, give_up=60)
        started = time.monotonic()
        for _ in range(1000):
            lockstep.before_turn()
        assert time.monotonic() - started < 1
        assert lockstep.turns == 0
    finally:
        activity.loop.close()


def test_a_sweep_goes_on_when_no_request_has_come_yet_or_the_loop_has_closed() -> None:
    activity = RequestActivity()
    lockstep = Lockstep(activity, give_up=60)
    lockstep.enrol()
    lockstep.before_turn()  # no loop known yet: at once
    loop = asyncio.new_event_loop()
    loop.close()
    activity.loop = loop
    started = time.monotonic()
    lockstep.before_turn()  # a closed loop: at once, not after `give_up`
    assert time.monotonic() - started < 1
