"""A cut through the local CDN (nginx configured like the CloudFront distribution): a compacted
stream's reads are cached; a retention run announces a cut a few seconds ahead; while it is
pending, every response the origin gives that holds what the cut drops is kept no longer than
until the cut takes effect; from then on the CDN never serves what was there (a read from the
beginning gets the snapshot, a read at an old offset 410), however often readers ask. The origin
is this process's server (its requests and answers observed), the run the server's own
(`retention_run` of its settings), as `dsaws serve` runs it every DS_RETENTION_INTERVAL."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from benchmarks.cdn_fanout import Rig, rig
from durable_streams_aws.core.runtime import retention_run
from durable_streams_aws.core.storage import Sealer, SealPolicy

pytestmark = pytest.mark.integration

DELAY = 3.0  # DS_RETENTION_DELAY
JSON_TYPE = {"Content-Type": "application/json"}
SEAL_ALL = SealPolicy(segment_bytes=600, hot_bytes=0, page_bytes=300)
SNAPSHOT_START = {"headers": {"control": "snapshot-start"}}
SNAPSHOT_END = {"headers": {"control": "snapshot-end"}}
# Cached as briefly as the delay allows for: a response cached before the cut was announced
# (max-age + stale-while-revalidate) is gone before it takes effect, as the default delay
# (DS_CACHE_MAX_AGE + DS_STALE_WHILE_REVALIDATE) makes sure of in a deployment.
MAX_AGE, STALE = 1, 1


@pytest.fixture(scope="module")
def cdn() -> Iterator[Rig]:
    # Reads of 400 bytes at most: a read from the beginning of the history written here stops
    # short of the tail, so it is cacheable.
    with rig(
        retention_delay=DELAY,
        cache_max_age=MAX_AGE,
        stale_while_revalidate=STALE,
        compaction_min_bytes=1,
        max_read_bytes=400,
        max_read_from_start_bytes=400,
    ) as running:
        yield running


def change(kind: str, key: str, value: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "row", "key": key, "headers": {"operation": kind}}
    if kind != "delete":
        message["value"] = value
    return message


def lifetime(cache_control: str) -> int:
    """How long a shared cache may keep a response (max-age plus stale-while-revalidate)."""
    if not cache_control.startswith("public"):
        return 0
    fields = dict(re.findall(r"([a-z-]+)=(\d+)", cache_control))
    return int(fields["max-age"]) + int(fields.get("stale-while-revalidate", 0))


@dataclass(frozen=True)
class Seen:
    """A response a reader got through the CDN."""

    sent: float
    status: int
    cache_status: str
    cache_control: str
    body: bytes
    earliest: str | None
    next_offset: str | None


@dataclass(frozen=True)
class Answered:
    """A response the origin gave the CDN (its own requests and its background refreshes)."""

    arrived: float
    offset: str
    status: int
    cache_control: str


class OriginTap:
    """Records every read response the origin gives, with when its request arrived."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.answered: list[Answered] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        arrived = time.time()
        query = dict(parse_qsl(scope["query_string"].decode()))

        async def record(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
                self.answered.append(
                    Answered(
                        arrived,
                        query.get("offset", "-1"),
                        message["status"],
                        headers.get("cache-control", ""),
                    )
                )
            await send(message)

        await self.app(scope, receive, record)


def get(client: httpx.Client, url: str, offset: str) -> Seen:
    sent = time.time()
    response = client.get(url, params={"offset": offset})
    return Seen(
        sent,
        response.status_code,
        response.headers.get("x-cache-status", "-"),
        response.headers.get("cache-control", ""),
        response.content,
        response.headers.get("stream-earliest-offset"),
        response.headers.get("stream-next-offset"),
    )


@pytest.fixture
def tap(cdn: Rig) -> Iterator[OriginTap]:
    tapped = OriginTap(cdn.counter.app)
    cdn.counter.app = tapped
    yield tapped
    cdn.counter.app = tapped.app


def test_once_a_cut_takes_effect_the_cdn_never_serves_what_it_dropped(
    cdn: Rig, tap: OriginTap
) -> None:
    name = "retained-state"
    origin = cdn.stream_url(cdn.origin_url, name)
    through_cdn = cdn.stream_url(cdn.cdn_url, name)
    history = [change("insert", f"k{n}", {"v": n}) for n in range(10)]
    history += [change("update", f"k{n % 10}", {"v": n}) for n in range(10, 30)]
    with httpx.Client(timeout=30) as client:
        created = client.put(origin, headers={**JSON_TYPE, "Stream-Retention": "compact"})
        assert created.status_code == 201
        acknowledged = []
        for at in range(0, len(history), 5):
            body = json.dumps(history[at : at + 5])
            response = client.post(origin, headers=JSON_TYPE, content=body)
            assert response.status_code == 204
            acknowledged.append(response.headers["stream-next-offset"])
        Sealer(cdn.backend.store, SEAL_ALL).seal(name)
        later = [change("update", "k1", {"v": "late"})]  # after the sealed history: kept
        assert client.post(origin, headers=JSON_TYPE, content=json.dumps(later)).is_success
        old = acknowledged[1]

        # Before any cut: both reads are cached, for as long as the settings say.
        first = get(client, through_cdn, "-1")
        assert first.status == 200 and first.cache_status == "MISS"
        assert first.cache_control == f"public, max-age={MAX_AGE}, stale-while-revalidate={STALE}"
        assert json.loads(first.body)[0] == history[0]
        assert get(client, through_cdn, "-1").cache_status == "HIT"
        at_old = get(client, through_cdn, old)
        assert at_old.status == 200 and get(client, through_cdn, old).cache_status == "HIT"

        # The server's own run (DS_RETENTION_DELAY=3), as `dsaws serve` or the sealer runs it.
        announced = time.time()
        report = retention_run(cdn.backend.store, cdn.backend.settings).run()
        assert report.cuts_announced == 1 and report.streams_compacted == 1, report
        info = cdn.backend.store.get(name)
        assert info is not None and info.pending_cut is not None
        effective = info.pending_cut.effective_at
        assert announced + DELAY - 0.5 <= effective <= time.time() + DELAY
        snapshot_token = info.pending_cut.retained.earliest_offset

        # Readers ask through the CDN, over and over, until well after the cut.
        seen: list[tuple[str, Seen]] = []
        while time.time() < effective + MAX_AGE + STALE + 1.5:
            seen.append(("-1", get(client, through_cdn, "-1")))
            seen.append((old, get(client, through_cdn, old)))
            time.sleep(0.02)
        # The snapshot (whole) and, read on from where it ends, the history after it.
        snapshot = get(client, through_cdn, "-1")
        rows = json.loads(snapshot.body)
        assert rows[0] == SNAPSHOT_START and SNAPSHOT_END in rows
        assert snapshot.next_offset is not None and not snapshot.next_offset.endswith("_s")
        assert json.loads(get(client, through_cdn, snapshot.next_offset).body) == later

    # While the cut was pending, the origin answered reads of what it drops as before, each
    # kept by caches no longer than the time left until the cut.
    # (Those that arrived just before it may be answered just after it.)
    pending = [a for a in tap.answered if announced <= a.arrived < effective - 0.1]
    assert len(pending) >= 2
    for answer in pending:
        assert answer.status == 200, answer
        assert lifetime(answer.cache_control) <= effective - answer.arrived, (answer, effective)
    assert any(lifetime(a.cache_control) < MAX_AGE + STALE for a in pending)  # cut down
    # Readers got the same as before all along.
    for offset, s in seen:
        if s.sent < effective - 0.05:
            assert s.status == 200 and s.earliest is None, (offset, s)
            assert s.body == (first.body if offset == "-1" else at_old.body)

    # Once in effect, the origin answers with the snapshot and 410; so does the CDN, however
    # often readers ask.
    def after_the_cut(offset: str, s: Seen) -> bool:
        if offset != "-1":
            return (
                s.status == 410
                and s.earliest == snapshot_token
                and s.cache_control == "no-store"
                and json.loads(s.body)["earliest_offset"] == snapshot_token
            )
        body = json.loads(s.body)
        return s.status == 200 and body[0] == SNAPSHOT_START and s.earliest == snapshot_token

    after = [(offset, s) for offset, s in seen if s.sent >= effective]
    assert len(after) > 40
    # Whatever the origin said, a CDN entry made before the cut lives MAX_AGE + STALE seconds
    # at most, plus nginx's rounding to its whole-second clock: by then, only the cut.
    bound = effective + MAX_AGE + STALE + 1.05
    assert all(after_the_cut(offset, s) for offset, s in after if s.sent >= bound)
    stale = [
        (round(s.sent - effective, 2), offset[-4:], s.cache_status, s.cache_control)
        for offset, s in after
        if not after_the_cut(offset, s)
    ]
    assert not stale, f"the CDN served what the cut dropped after it took effect: {stale[:3]}"
