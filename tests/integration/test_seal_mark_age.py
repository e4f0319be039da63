"""How long the oldest stream marked for sealing has waited: the writer's clock stamps each
mark, and a sealer on another instance (as another Lambda function is) reads the age."""

from __future__ import annotations

import pytest
from support import FakeClock, store_on

from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, Payload, Sealer, SealPolicy
from durable_streams_aws.core.storage import _items as items

pytestmark = pytest.mark.integration

START = 1_900_000_000.0


def write(store: object, path: str, data: bytes) -> None:
    store.create(path, CreateSpec("text/plain", None, None, False, Payload(b"")))  # type: ignore[attr-defined]
    outcome = store.append(path, AppendIntent("text/plain", True, False), Payload(data))  # type: ignore[attr-defined]
    assert outcome.decision is not None and outcome.decision.commits


def test_the_sealer_reports_how_long_the_oldest_mark_waited(backend: Backend) -> None:
    writer_clock, sealer_clock = FakeClock(START), FakeClock(START + 100)
    writer = store_on(backend, clock=writer_clock, seal_mark_bytes=0)  # every commit marks
    write(writer, "older", b"a" * 100)
    writer_clock.now += 60
    write(writer, "newer", b"b" * 100)
    sealer = Sealer(store_on(backend, clock=sealer_clock), SealPolicy(hot_bytes=0))
    report = sealer.run()
    assert report.marks_found == 2 and report.streams_sealed == 2
    assert report.oldest_mark_seconds == 100
    again = sealer.run()  # the marks were cleared as their streams were sealed
    assert (again.marks_found, again.oldest_mark_seconds) == (0, 0)


def test_a_mark_written_without_its_time_is_sealed_and_has_no_age(backend: Backend) -> None:
    writer = store_on(backend, clock=FakeClock(START), seal_mark_bytes=1 << 40)  # no marks
    write(writer, "legacy", b"c" * 100)
    info = writer.snapshot("legacy")
    assert info is not None
    mark = items.seal_mark_put(backend.settings.table, info, info.tail, START)["Put"]
    del mark["Item"]["t"]  # as commits wrote marks before they carried their time
    backend.dynamodb.put_item(**mark)
    report = Sealer(store_on(backend, clock=FakeClock(START + 500)), SealPolicy(hot_bytes=0)).run()
    assert (report.marks_found, report.streams_sealed, report.oldest_mark_seconds) == (1, 1, 0)
