"""Waiters on one stream in one process share their tail checks: N long-poll or SSE waiters cost
about one GetItem per poll interval, not N (issue 13, "shared waits at the origin")."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest
from support import store_on

from benchmarks.aws_calls import CallMeter
from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.http import live
from durable_streams_aws.core.http.live import SharedTailChecks, TailWatcher
from durable_streams_aws.core.http.wakeups import Wakeups
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, Payload

INTERVAL = 0.2
BUDGET = 1.0
# A poll interval whose grid ticks (multiples of it on the monotonic clock) are days apart, so
# that none falls inside a test; with 10 s, one fell in one run of some thirty.
NO_POLL = 1e6


async def _wait_all(watcher: TailWatcher, path: str, position: int, waiters: int) -> list:
    return await asyncio.gather(
        *(watcher.wait_for_change(path, position, BUDGET) for _ in range(waiters))
    )


@pytest.mark.parametrize("waiters", [1, 10, 100])
def test_waiters_share_one_tail_check_per_interval(backend: Backend, waiters: int) -> None:
    store = backend.store
    store.create("s", CreateSpec("text/plain"))
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    watcher = TailWatcher(store, Wakeups(), INTERVAL)
    started = time.monotonic()
    answers = asyncio.run(_wait_all(watcher, "s", 0, waiters))
    elapsed = time.monotonic() - started
    checks = meter.calls["GetItem"]
    print(f"\n{waiters} waiters, {elapsed:.1f} s: {checks} GetItem ({checks / elapsed:.1f}/s)")
    assert all(answer is not None and answer.tail == 0 for answer in answers)
    # One check per interval on the shared grid (the deadline reuses the last tick's).
    assert checks <= BUDGET / INTERVAL + 1


def test_an_append_wakes_every_waiter_with_one_shared_check(backend: Backend) -> None:
    store = backend.store
    store.create("s", CreateSpec("text/plain"))
    wakeups = Wakeups()
    watcher = TailWatcher(store, wakeups, NO_POLL)
    meter = CallMeter()
    meter.attach(backend.dynamodb)

    async def scenario() -> list:
        waiting = asyncio.ensure_future(_wait_all(watcher, "s", 0, 100))
        await asyncio.sleep(0.3)
        intent = AppendIntent("text/plain", True, False, None, None)
        await asyncio.to_thread(store.append, "s", intent, Payload(b"new"))
        meter.reset()
        wakeups.notify("s")
        return await waiting

    answers = asyncio.run(scenario())
    assert all(answer is not None and answer.tail == 3 for answer in answers)
    assert meter.calls["GetItem"] == 1


def test_an_append_notified_before_the_waiter_listened_still_wakes_it(backend: Backend) -> None:
    """A reader's snapshot may come from a check begun before this process's append, whose
    notification came before the reader began to wait: it must not sleep until the next poll
    (it did, up to a poll interval: live delivery's p99 was 200 ms in one run in four)."""
    store = backend.store
    store.create("s", CreateSpec("text/plain"))
    wakeups = Wakeups()
    watcher = TailWatcher(store, wakeups, NO_POLL)  # a missed wake-up would wait for good
    meter = CallMeter()
    meter.attach(backend.dynamodb)

    async def scenario() -> Any:
        snapshot = await watcher.checks.get("s", time.monotonic())  # the reader's, tail 0
        assert snapshot is not None and snapshot.tail == 0
        intent = AppendIntent("text/plain", True, False, None, None)
        await asyncio.to_thread(store.append, "s", intent, Payload(b"new"))
        wakeups.notify("s")
        meter.reset()
        return await asyncio.wait_for(watcher.wait_for_change("s", 0, 30.0), 2.0)

    answer = asyncio.run(scenario())
    assert answer is not None and answer.tail == 3
    assert meter.calls["GetItem"] == 1  # the one check begun after the notification


def test_a_notification_already_seen_does_not_wake_a_waiter_again(backend: Backend) -> None:
    """Once a check begun after a notification has been looked at, the waiter waits."""
    store = backend.store
    store.create("s", CreateSpec("text/plain"))
    wakeups = Wakeups()
    watcher = TailWatcher(store, wakeups, NO_POLL)
    wakeups.notify("s")
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    started = time.monotonic()
    answer = asyncio.run(watcher.wait_for_change("s", 0, 0.5))
    assert answer is not None and answer.tail == 0
    assert time.monotonic() - started >= 0.45  # it waited out its budget
    assert meter.calls["GetItem"] <= 2  # one after the notification, one at the deadline


# How each live mode waits: the settings, the request, and what a woken reader must get. No
# grid poll falls inside the test: the append's wake-up is the only reason to look. SSE runs
# in bounded-window mode (as under Lambda): it ends after its data event, so each answer is
# whole.
LIVE_MODES = {
    "long-poll": (
        {"long_poll_timeout": 900, "poll_interval": NO_POLL},
        lambda a: a.content == b"new",
    ),
    "sse": (
        {"sse_mode": "window", "sse_window": 900, "poll_interval": NO_POLL},
        lambda a: "data:new" in a.text,
    ),
}


@pytest.mark.parametrize("waiters", [1, 10, 100])
@pytest.mark.parametrize("mode", list(LIVE_MODES))
def test_live_readers_woken_by_an_append_share_its_check_and_its_read(
    backend: Backend, mode: str, waiters: int
) -> None:
    update, delivered = LIVE_MODES[mode]
    app = create_app(backend.settings.model_copy(update=update), backend.store)
    meter = CallMeter()
    meter.attach_backend(backend)
    text = {"Content-Type": "text/plain"}

    async def scenario() -> tuple[list[httpx.Response], dict[str, int]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            await client.put("/v1/stream/live", headers=text, content=b"old")
            tail = (await client.head("/v1/stream/live")).headers["Stream-Next-Offset"]
            params = {"offset": tail, "live": mode}
            readers = [
                asyncio.ensure_future(client.get("/v1/stream/live", params=params, timeout=30))
                for _ in range(waiters)
            ]
            await every_one_waiting(app, waiters)
            meter.reset()
            await client.post("/v1/stream/live", headers=text, content=b"new")
            answers = await asyncio.gather(*readers)
            return answers, dict(meter.calls)

    answers, calls = asyncio.run(scenario())
    print(f"\n{waiters} {mode} readers woken by one append: AWS calls {calls}")
    assert all(a.status_code == 200 and delivered(a) for a in answers)
    assert calls.get("TransactWriteItems") == 1  # the append itself
    assert calls.get("Query", 0) <= 1  # the new data, read once for every reader
    assert calls.get("GetItem", 0) == 1  # the shared check after the wake-up


async def every_one_waiting(app: Any, waiters: int) -> None:
    """Until `waiters` readers wait at the tail (a busy machine is slower)."""
    wakeups = app.state.endpoints.wakeups
    for _ in range(600):
        if wakeups.pending() == waiters:
            break
        await asyncio.sleep(0.05)
    assert wakeups.pending() == waiters


def test_a_waiter_that_goes_away_does_not_cancel_the_shared_check(backend: Backend) -> None:
    """The check is still queued (every shared thread is busy) when one of its two waiters
    goes away: the other still gets its answer."""
    store = backend.store
    store.create("s", CreateSpec("text/plain"))
    release = threading.Event()
    busy = [live._pool().submit(release.wait, 10) for _ in range(live._pool()._max_workers)]
    checks = SharedTailChecks(store)

    async def scenario() -> object:
        leaving = asyncio.ensure_future(checks.get("s", 0.0))
        staying = asyncio.ensure_future(checks.get("s", 0.0))  # joins the same check
        await asyncio.sleep(0.05)
        leaving.cancel()
        await asyncio.sleep(0.05)
        release.set()
        return await staying

    try:
        info = asyncio.run(scenario())
    finally:
        release.set()
        for task in busy:
            task.result(10)
    assert info is not None and info.tail == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("readers", [1, 50])
def test_long_polls_arriving_after_a_delivery_share_one_stream_read(
    backend: Backend, readers: int
) -> None:
    """Readers sent back by one delivery arrive together: the check made after the append
    serves all of them (it began after this process's last append and is less than a poll
    interval old), instead of a GetItem each."""
    update = {"long_poll_timeout": 900, "poll_interval": 600}
    app = create_app(backend.settings.model_copy(update=update), backend.store)
    meter = CallMeter()
    meter.attach(backend.dynamodb)
    text = {"Content-Type": "text/plain"}

    async def scenario() -> tuple[dict[str, int], list[httpx.Response]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            await client.put("/v1/stream/back", headers=text, content=b"old")
            await client.post("/v1/stream/back", headers=text, content=b"new")
            tail = (await client.head("/v1/stream/back")).headers["Stream-Next-Offset"]
            meter.reset()
            params = {"offset": tail, "live": "long-poll"}
            polls = [
                asyncio.ensure_future(client.get("/v1/stream/back", params=params, timeout=30))
                for _ in range(readers)
            ]
            await every_one_waiting(app, readers)
            arrivals = dict(meter.calls)
            await client.post("/v1/stream/back", headers=text, content=b"next")
            return arrivals, await asyncio.gather(*polls)

    arrivals, answers = asyncio.run(scenario())
    print(f"\n{readers} long-polls arriving after an append: AWS calls {arrivals}")
    assert arrivals.get("GetItem", 0) <= 1
    assert all(a.status_code == 200 and a.content == b"next" for a in answers)


def _apps(backend: Backend, count: int) -> list[Any]:
    """Apps on one store, as Lambda instances are: no shared memory. A poll interval longer
    than the test, so every check a live read could share is young enough."""
    update = {"long_poll_timeout": 0.3, "poll_interval": 600}
    settings = backend.settings.model_copy(update=update)
    return [create_app(settings, backend.store) for _ in range(count)]


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


TEXT = {"Content-Type": "text/plain"}


def test_a_live_read_past_a_shared_tail_looks_again(backend: Backend) -> None:
    """An offset another instance handed out (past the tail this one saw last) is checked
    afresh, not refused as past the end."""
    here, elsewhere = _apps(backend, 2)

    async def scenario() -> httpx.Response:
        async with _client(here) as local, _client(elsewhere) as remote:
            await local.put("/v1/stream/two", headers=TEXT, content=b"a")
            tail = (await local.head("/v1/stream/two")).headers["Stream-Next-Offset"]
            params = {"offset": tail, "live": "long-poll"}
            assert (await local.get("/v1/stream/two", params=params)).status_code == 204
            appended = await remote.post("/v1/stream/two", headers=TEXT, content=b"b")
            later = {"offset": appended.headers["Stream-Next-Offset"], "live": "long-poll"}
            return await local.get("/v1/stream/two", params=later)

    answer = asyncio.run(scenario())
    assert answer.status_code == 204, answer.text


def test_a_stream_re_created_elsewhere_is_never_read_from_a_shared_check(
    backend: Backend,
) -> None:
    """Deleted and created again on another instance, within a poll interval of this one's
    last check: a live read at the new stream's offset gets nothing of the old stream."""
    here, elsewhere = _apps(backend, 2)

    async def scenario() -> httpx.Response:
        async with _client(here) as local, _client(elsewhere) as remote:
            await local.put("/v1/stream/again", headers=TEXT, content=b"o" * 1000)
            tail = (await local.head("/v1/stream/again")).headers["Stream-Next-Offset"]
            waiting = {"offset": tail, "live": "long-poll"}
            assert (await local.get("/v1/stream/again", params=waiting)).status_code == 204
            assert (await remote.delete("/v1/stream/again")).status_code == 204
            created = await remote.put("/v1/stream/again", headers=TEXT, content=b"n" * 10)
            assert created.status_code == 201
            offset = created.headers["Stream-Next-Offset"]
            params = {"offset": offset, "live": "long-poll"}
            return await local.get("/v1/stream/again", params=params)

    answer = asyncio.run(scenario())
    assert answer.status_code == 204, (answer.status_code, answer.text[:50])  # nothing new yet


def test_a_stream_created_here_is_found_by_the_next_live_read(backend: Backend) -> None:
    """A live read answered 404 before the create must not make the next one 404 too."""
    (here,) = _apps(backend, 1)

    async def scenario() -> tuple[int, int]:
        async with _client(here) as client:
            params = {"offset": "-1", "live": "long-poll"}
            before = (await client.get("/v1/stream/new", params=params)).status_code
            assert (await client.put("/v1/stream/new", headers=TEXT)).status_code == 201
            after = (await client.get("/v1/stream/new", params=params)).status_code
            return before, after

    assert asyncio.run(scenario()) == (404, 204)


class _SlowStore:
    """A store whose check reads the tail as it starts and answers when released: an append
    can commit (and be notified) while a check is in flight, and the check misses it."""

    def __init__(self) -> None:
        self.tail = 0
        self.checking = threading.Event()
        self.release = threading.Event()

    def get(self, path: str) -> Any:
        tail = self.tail
        self.checking.set()
        self.release.wait(5)
        return type("Info", (), {"tail": tail, "soft_deleted": False, "closed": False})()


def test_a_change_notified_while_a_check_is_in_flight_is_seen_at_once() -> None:
    """A waiter woken (here by a first notification) checks the tail; an append commits and
    notifies while that check is in flight, which read the tail before it: the waiter checks
    again at once instead of waiting for the next poll (10 s here; 200 ms in a deployment,
    where the HTTP benchmark's live reader met it 2 runs in 5)."""
    store = _SlowStore()
    wakeups = Wakeups()
    watcher = TailWatcher(store, wakeups, 10.0)  # type: ignore[arg-type]

    async def scenario() -> tuple[Any, float]:
        waiting = asyncio.ensure_future(watcher.wait_for_change("s", 0, 5.0))
        await asyncio.sleep(0.05)
        wakeups.notify("s")  # a change that did not move the tail (as a close of another)
        await asyncio.to_thread(store.checking.wait, 5)
        store.tail = 3  # committed while the check is in flight
        wakeups.notify("s")
        notified = time.monotonic()
        store.release.set()
        info = await waiting
        return info, time.monotonic() - notified

    info, after = asyncio.run(scenario())
    assert info.tail == 3
    assert after < 1.0


def test_readers_waiting_at_a_pending_offset_share_their_looks(backend: Backend) -> None:
    """20 reads at an offset above a range whose writer died wait until it is voided (0.4 s
    here), looking at the stream on a grid shared by every waiter: about one look (a
    consistent read and a Query) per tick in all, not one per reader per tick (security
    review 3, F4: 30 readers cost 859 calls in 2.2 s)."""
    writer, other, reader = (store_on(backend, void_after=0.4) for _ in range(3))
    writer.create("s", CreateSpec("text/plain", payload=Payload(b"first;")))
    before = writer.get("s")
    assert before is not None
    dead = writer.appender._reserve(before, len(b"lost;"))  # reserved; its writer died
    other.recent.mark_hot("s")
    after = other.append("s", AppendIntent("text/plain", True, False), Payload(b"after;"))
    assert after.info is not None
    app = create_app(backend.settings, reader)
    meter = CallMeter()
    meter.attach(backend.dynamodb)

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            offset = format_offset(dead.reserved_end)  # where the dead range ends
            return await asyncio.gather(
                *(client.get("/v1/stream/s", params={"offset": offset}) for _ in range(20))
            )

    started = time.monotonic()
    answers = asyncio.run(scenario())
    elapsed = time.monotonic() - started
    looks = meter.calls["GetItem"] + meter.calls["Query"]
    print(f"\n20 readers at a dead range, {elapsed:.2f} s: {looks} GetItem and Query")
    assert [answer.content for answer in answers] == [b"after;"] * 20
    # Ticks at 10, 30, 70, 150, 310 ms, then every poll interval: about 7 until it is voided
    # (69 calls in all here; 166 when each reader looked on its own). Each reader's own first
    # look (it must see what was acknowledged before it arrived) and its read come on top.
    ticks = 6 + elapsed / backend.settings.poll_interval
    assert looks <= 2 * ticks + 4 * 20
    # The dead range is voided by one look (8 voided it when each reader looked on its own;
    # a reader that arrived late may meet it due in its own first look).
    assert meter.calls["TransactWriteItems"] <= 2
