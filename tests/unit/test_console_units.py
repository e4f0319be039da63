"""The console's pure parts: the rate ring, CloudWatch's answer as series, the assets'
fingerprints, the scan cache, and the reports built from store values."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from durable_streams_aws.core.console import CloudWatchRates, ConsoleAssets, RateRecorder
from durable_streams_aws.core.console._rates import SERVICE, RecordingTelemetry
from durable_streams_aws.core.console._reports import last_activity, stream_internals, stream_row
from durable_streams_aws.core.console._scans import ScanCache
from durable_streams_aws.core.protocol.producer import ProducerState
from durable_streams_aws.core.storage.model import StreamInfo
from durable_streams_aws.core.telemetry import Metric


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_ring_sums_each_step_and_forgets_what_left_the_window() -> None:
    clock = Clock(1000.0)
    ring = RateRecorder(step=5, window=20, clock=clock)
    ring.record(Metric.APPENDS, 1)
    ring.record(Metric.APPENDS, 2)
    ring.record(Metric.BYTES_APPENDED, 100)
    ring.record(Metric.APPENDS_DEDUPLICATED, 9)  # not plotted: not kept
    clock.now = 1007.0
    ring.record(Metric.APPENDS, 4)
    rates = ring.rates()
    assert rates.now == 1007.0
    assert rates.series["appends"] == [(990, 0.0), (995, 0.0), (1000, 3.0), (1005, 4.0)]
    assert rates.series["bytes_appended"][2] == (1000, 100.0)
    clock.now = 1021.0  # the slot of 1000 is reused for 1020: its old sums are gone
    ring.record(Metric.APPENDS, 1)
    assert ring.rates().series["appends"] == [(1005, 4.0), (1010, 0.0), (1015, 0.0), (1020, 1.0)]
    clock.now = 5000.0  # long after: every slot is stale
    assert all(count == 0.0 for _, count in ring.rates().series["appends"])


def test_recording_telemetry_feeds_the_ring_and_passes_every_figure_on() -> None:
    seen: list[tuple[Metric, float]] = []

    class Inner:
        def count(self, metric: Metric, value: float = 1) -> None:
            seen.append((metric, value))

        def count_by(self, metric: Metric, dimensions: Any, value: float = 1) -> None:
            seen.append((metric, value))

    ring = RateRecorder(clock=Clock(100.0))
    telemetry = RecordingTelemetry(ring, Inner())
    telemetry.count(Metric.READS)
    telemetry.count_by(Metric.ORIGIN_READS, {"Shape": "catch-up"})
    assert seen == [(Metric.READS, 1), (Metric.ORIGIN_READS, 1)]
    assert sum(count for _, count in ring.rates().series["reads"]) == 1


def test_cloudwatch_answers_become_the_same_series_with_gaps_as_zero() -> None:
    asked: list[dict[str, Any]] = []

    class FakeCloudWatch:
        def get_metric_data(self, **request: Any) -> dict[str, Any]:
            asked.append(request)
            moment = datetime.fromtimestamp(request["EndTime"] - 120, UTC)
            if "NextToken" not in request:
                return {
                    "MetricDataResults": [
                        {"Id": "appends", "Timestamps": [moment], "Values": [42]}
                    ],
                    "NextToken": "more",
                }
            return {"MetricDataResults": [{"Id": "reads", "Timestamps": [moment], "Values": [7]}]}

    rates = CloudWatchRates(FakeCloudWatch(), "DurableStreams", window=600, clock=Clock(10_030.0))
    found = rates.rates()
    assert len(asked) == 2 and asked[1]["NextToken"] == "more"
    query = asked[0]["MetricDataQueries"][0]["MetricStat"]
    assert query["Metric"]["Namespace"] == "DurableStreams" and query["Stat"] == "Sum"
    assert query["Metric"]["Dimensions"] == [{"Name": "service", "Value": SERVICE}]
    assert found.step_seconds == 60 and len(found.series["appends"]) == 10
    # The minute in progress (10,020 to 10,080) is not asked for: CloudWatch lacks it yet.
    assert asked[0]["EndTime"] == 10_020 and found.now == 10_020.0
    assert dict(found.series["appends"])[asked[0]["EndTime"] - 120] == 42.0
    assert sum(v for _, v in found.series["reads"]) == 7.0
    assert sum(v for _, v in found.series["bytes_appended"]) == 0.0


def test_the_services_dimension_is_the_one_the_functions_write() -> None:
    from durable_streams_aws.functions._metrics import SERVICE as written

    assert written == SERVICE


def test_assets_are_named_by_their_content_and_the_page_by_those_names() -> None:
    page = b'<link href="assets/a.css"><script defer src="assets/b.js"></script>'
    assets = ConsoleAssets({"index.html": page, "a.css": b"body{}", "b.js": b"1;"})
    js = next(name for name in assets.names if name.endswith(".js"))
    assert js.startswith("b.") and len(js) == len("b.") + 12 + len(".js")
    assert f'src="assets/{js}"'.encode() in assets.page
    assert assets.asset(js) is not None and assets.asset(js).media_type.startswith(
        "text/javascript"
    )
    changed = ConsoleAssets({"index.html": page, "a.css": b"body{}", "b.js": b"2;"})
    assert changed.names != assets.names  # a new version, a new name: caches never mix them
    for name in ("b.js", "../b.js", "x/" + js, ""):
        assert assets.asset(name) is None


def test_a_page_naming_an_asset_that_is_not_shipped_fails_at_start() -> None:
    with pytest.raises(ValueError, match=r"assets/missing\.js"):
        ConsoleAssets({"index.html": b'<script src="assets/missing.js"></script>'})


def test_the_packaged_page_names_only_shipped_assets() -> None:
    assets = ConsoleAssets.packaged()
    assert b"assets/" in assets.page and assets.names


def test_the_scan_cache_answers_from_memory_until_its_age_then_scans_again() -> None:
    clock = Clock(0.0)
    cache = ScanCache(max_age=60, capacity=2, clock=clock)
    scans: list[str] = []

    def scan(key: str) -> Any:
        return lambda: scans.append(key) or len(scans)

    async def run() -> None:
        assert (await cache.get("a", scan("a"))).value == 1
        clock.now = 30
        assert (await cache.get("a", scan("a"))).value == 1  # cached
        assert (await cache.get("a", scan("a"), fresh_after=10)).value == 2  # refreshed
        clock.now = 35
        assert (await cache.get("a", scan("a"), fresh_after=10)).value == 2  # 5 s old: kept
        await cache.get("b", scan("b"))
        await cache.get("c", scan("c"))  # over capacity: the least recent entry goes
        assert (await cache.get("a", scan("a"))).value == 5

    asyncio.run(run())
    assert scans == ["a", "a", "b", "c", "a"]


def test_one_scan_per_key_at_a_time_others_get_the_stale_value_or_wait() -> None:
    clock = Clock(0.0)
    cache = ScanCache(max_age=60, capacity=4, clock=clock)
    release = threading.Event()
    started: list[str] = []

    def slow(key: str, value: int) -> Any:
        def gather() -> int:
            started.append(key)
            release.wait(5)
            return value

        return gather

    async def run() -> None:
        first = asyncio.ensure_future(cache.get("a", slow("a", 1)))
        await asyncio.sleep(0.05)
        waiting = [asyncio.ensure_future(cache.get("a", slow("a", 99))) for _ in range(5)]
        other = await asyncio.wait_for(cache.get("b", lambda: 7), 2)  # not held up by "a"
        assert other.value == 7
        release.set()
        assert [(await task).value for task in [first, *waiting]] == [1] * 6
        clock.now = 100  # stale: one request gathers afresh, the others get the stale value
        release.clear()
        again = asyncio.ensure_future(cache.get("a", slow("a", 2)))
        await asyncio.sleep(0.05)
        assert (await cache.get("a", slow("a", 3))).value == 1
        release.set()
        assert (await again).value == 2

    asyncio.run(run())
    assert started == ["a", "a"]


def test_a_failed_scan_is_answered_as_failed_for_a_while_without_scanning() -> None:
    clock = Clock(0.0)
    cache = ScanCache(max_age=60, failure_age=30, clock=clock)
    calls: list[int] = []

    def failing() -> int:
        calls.append(1)
        raise TimeoutError("too long")

    async def run() -> None:
        for _ in range(3):
            with pytest.raises(TimeoutError):
                await cache.get("", failing)
        clock.now = 31
        assert (await cache.get("", lambda: 5)).value == 5

    asyncio.run(run())
    assert len(calls) == 1


def _info(**changes: Any) -> StreamInfo:
    base = StreamInfo(
        path="p",
        incarnation="i",
        content_type="text/plain",
        tail=0,
        closed=False,
        closed_by=None,
        last_stream_seq=None,
        ttl_seconds=None,
        expires_at=None,
        last_access=0.0,
        created_at=1_800_000_000.0,
    )
    return dataclasses.replace(base, **changes)


def test_last_activity_is_the_later_of_a_commit_and_a_reservation() -> None:
    assert last_activity(_info()) is None  # nothing appended
    assert last_activity(_info(tail=5, last_access=10.0, reserved_at=20.0)) == 20.0
    assert last_activity(_info(tail=5, last_access=30.0, reserved_at=20.0)) == 30.0
    assert stream_row(_info(tail=5, last_access=1_800_000_001.0))["last_activity"].endswith("Z")


def test_a_forks_sealed_share_counts_its_own_data_only() -> None:
    fork = _info(tail=150, forked_from="src", fork_position=100, sealed=125)
    internals = stream_internals(fork, [("w", ProducerState(1, 4))], now=0.0)
    assert internals["sealed_bytes"] == 25 and internals["sealed_share"] == 0.5
    assert internals["fork_offset"] is not None
    assert internals["producers"] == [{"id": "w", "epoch": 1, "last_seq": 4}]
    empty = stream_internals(_info(), [], now=0.0)
    assert empty["sealed_share"] == 0.0 and empty["earliest_offset"] is None
