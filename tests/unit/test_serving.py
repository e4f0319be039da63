"""What `dsaws serve` runs beside its app (`core.serving`): the background sealer, wired to
wait for a quiet server on the embedded emulator, and the collector's freezing policy."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.serving import (
    EMBEDDED_PAGE_ITEMS,
    EMBEDDED_SCAN_ITEMS,
    FreezeAfterSlowCollections,
    Serving,
    prepare,
)
from durable_streams_aws.core.storage.sealer import DELETE_THREADS


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _ignore(message: Any) -> None:
    pass


@pytest.fixture
def prepared() -> Iterator[list[Serving]]:
    made: list[Serving] = []
    yield made
    for serving in made:
        serving.stop()


def _prepare(
    made: list[Serving],
    embedded: bool,
    interval: float = 3600,
    collect_interval: float = 3600,
    compact: Any = None,
    retention_interval: float | None = None,
) -> Serving:
    store = SimpleNamespace(dynamodb=None, s3=None, table="t", bucket="b")  # no sweep runs
    settings = Settings(
        seal_interval=interval,
        collect_interval=collect_interval,
        retention_interval=collect_interval if retention_interval is None else retention_interval,
    )
    serving = prepare(_app, settings, store, embedded, compact)  # type: ignore[arg-type]
    made.append(serving)
    return serving


def test_on_the_embedded_emulator_sweeps_wait_for_the_requests_of_the_served_app(
    prepared: list[Serving],
) -> None:
    serving = _prepare(prepared, embedded=True)
    assert serving.sealing is not None and serving.sealing.quiet is not None
    assert serving.sealing.sealer.delete_threads == 1
    time.sleep(0.2)
    assert serving.sealing.quiet.idle_for() >= 0.2
    asyncio.run(serving.asgi({"type": "http"}, None, _ignore))
    assert serving.sealing.quiet.idle_for() < 0.1


def test_on_the_embedded_emulator_sweeps_take_turns_with_requests_in_short_steps(
    prepared: list[Serving],
) -> None:
    serving = _prepare(prepared, embedded=True)
    assert serving.lockstep is not None
    assert serving.sealing is not None and serving.collecting is not None
    assert serving.sealing.lockstep is serving.collecting.lockstep is serving.lockstep
    # The sealer's Queries are pages of at most EMBEDDED_PAGE_ITEMS: each is a step a request
    # may wait for (a 1 MB page of chunks held the emulator for up to 360 ms).
    assert serving.sealing.sealer.page_items == EMBEDDED_PAGE_ITEMS <= 100
    # And the collector's Scans and Queries, pages of at most EMBEDDED_SCAN_ITEMS (a 1 MB
    # page of its scan held the emulator for 60 to 160 ms).
    assert serving.collecting.collector.page_items == EMBEDDED_SCAN_ITEMS <= 500
    # The served app tells the lockstep where its event loop is and when a request ends.
    asyncio.run(serving.asgi({"type": "http"}, None, _ignore))
    assert serving.lockstep.activity.loop is not None
    assert serving.lockstep.activity.on_idle is not None
    assert serving.lockstep.activity.in_flight == 0


def test_against_aws_sweeps_do_not_wait_and_the_app_is_served_as_it_is(
    prepared: list[Serving],
) -> None:
    serving = _prepare(prepared, embedded=False)
    assert serving.asgi is _app
    assert serving.sealing is not None and serving.sealing.quiet is None
    assert serving.sealing.sealer.delete_threads == DELETE_THREADS
    assert serving.lockstep is None and serving.sealing.lockstep is None
    assert serving.sealing.sealer.page_items is None  # DynamoDB's 1 MB pages
    assert serving.collecting is not None and serving.collecting.collector.page_items is None


def test_no_sealer_when_sealing_is_off(prepared: list[Serving]) -> None:
    serving = _prepare(prepared, embedded=True, interval=0)
    assert serving.sealing is None and serving.collecting is not None
    serving = _prepare(prepared, embedded=True, interval=0, collect_interval=0)
    assert serving.sealing is None and serving.collecting is None and serving.asgi is _app
    assert serving.retaining is None


def test_retention_runs_beside_the_sealer_taking_turns_with_requests(
    prepared: list[Serving],
) -> None:
    serving = _prepare(
        prepared, embedded=True, interval=0, collect_interval=0, retention_interval=5
    )
    assert serving.retaining is not None and serving.retaining.interval == 5
    assert serving.retaining.lockstep is serving.lockstep is not None


def test_the_collector_sweeps_beside_the_sealer_and_compacts_after_it_removed_something(
    prepared: list[Serving],
) -> None:
    def compact() -> None:
        pass

    serving = _prepare(prepared, embedded=True, compact=compact)
    assert serving.collecting is not None and serving.sealing is not None
    assert serving.collecting.quiet is serving.sealing.quiet is not None
    assert serving.collecting.after is compact and serving.collecting.interval == 3600
    serving = _prepare(prepared, embedded=False)
    assert serving.collecting is not None and serving.collecting.quiet is None


def test_what_the_server_built_is_frozen_and_one_policy_is_installed(
    prepared: list[Serving],
) -> None:
    gc.unfreeze()  # whatever this test process froze before (the whole process: harmless)
    _prepare(prepared, embedded=True)
    _prepare(prepared, embedded=False)
    assert gc.get_freeze_count() > 0
    policies = [c for c in gc.callbacks if isinstance(c, FreezeAfterSlowCollections)]
    assert len(policies) == 1


def _collection(policy: FreezeAfterSlowCollections, generation: int, cpu_seconds: float) -> None:
    policy("start", {"generation": generation})
    started = time.thread_time()
    while time.thread_time() - started < cpu_seconds:
        pass
    policy("stop", {"generation": generation})


def test_only_a_slow_full_collection_freezes_and_at_most_once_a_period() -> None:
    freezes: list[float] = []
    policy = FreezeAfterSlowCollections(slow=0.05, every=0.5, freeze=lambda: freezes.append(1))
    _collection(policy, generation=2, cpu_seconds=0)
    _collection(policy, generation=1, cpu_seconds=0.1)  # young generations: never
    policy("start", {"generation": 2})
    time.sleep(0.1)  # a pause of the process, not the collection's work
    policy("stop", {"generation": 2})
    assert freezes == []
    _collection(policy, generation=2, cpu_seconds=0.1)
    assert len(freezes) == 1
    _collection(policy, generation=2, cpu_seconds=0.1)  # within the period: no freeze
    assert len(freezes) == 1
    time.sleep(0.5)
    _collection(policy, generation=2, cpu_seconds=0.1)
    assert len(freezes) == 2
