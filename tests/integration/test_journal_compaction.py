"""Compacting the embedded emulator's journal while it serves: once the journal is mostly
history it is rewritten as the state it rebuilds, requests go on meanwhile and land in the new
journal, and a kill at any point of a compaction loses nothing acknowledged and brings nothing
deleted back."""

from __future__ import annotations

import os
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest
from test_emulator_journal import clients, contents, forget, names, write_some

from durable_streams_aws.infra import _journal
from durable_streams_aws.infra import emulator as emulator_module
from durable_streams_aws.infra._journal import JOURNAL_NAME
from durable_streams_aws.infra.emulator import Emulator, Replay

__all__ = ["names"]  # the fixture, used by name

MARKER = b"deleted-history-" * 4096  # 64 KiB nobody should find in a compacted journal


def write_history(emulator: Emulator, table: str, bucket: str, rounds: int = 6) -> None:
    """Objects and items written and then deleted: history a compaction drops."""
    dynamodb, s3 = clients(emulator)
    for number in range(rounds):
        s3.put_object(Bucket=bucket, Key=f"old/{number}", Body=MARKER)
        s3.delete_object(Bucket=bucket, Key=f"old/{number}")
        key = {"pk": {"S": "history"}, "sk": {"S": str(number)}}
        dynamodb.put_item(TableName=table, Item={**key, "b": {"B": MARKER}})
        dynamodb.delete_item(TableName=table, Key=key)


def assert_a_restart_holds(directory: Path, table: str, bucket: str, held: Any) -> None:
    """A new emulator on `directory` (moto's copy of the table and bucket forgotten first, as
    a new process would start) holds `held`."""
    forget(table, bucket)
    again = Emulator(data_dir=directory)
    try:
        assert contents(again, table, bucket) == held
    finally:
        again.stop()


def test_a_journal_of_mostly_history_is_compacted_while_the_emulator_runs(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    table, bucket = names
    emulator = Emulator(data_dir=tmp_path, compact_min_bytes=64 * 1024)
    try:
        write_some(emulator, table, bucket)
        held = contents(emulator, table, bucket)
        assert not emulator.compact_if_mostly_history()  # not long enough yet: nothing to do
        write_history(emulator, table, bucket)
        journal = tmp_path / JOURNAL_NAME
        before = journal.stat().st_size
        assert MARKER in journal.read_bytes()
        assert emulator.compact_if_mostly_history()
        after = journal.stat().st_size
        assert after < before / 3 and MARKER not in journal.read_bytes()
        assert contents(emulator, table, bucket) == held
        # Writes after the compaction go to the new journal.
        dynamodb, _ = clients(emulator)
        dynamodb.put_item(TableName=table, Item={"pk": {"S": "late"}, "sk": {"S": "1"}})
        held = contents(emulator, table, bucket)
    finally:
        emulator.stop()
    assert_a_restart_holds(tmp_path, table, bucket, held)


def test_a_journal_of_mostly_live_data_is_left_alone(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    table, bucket = names
    emulator = Emulator(data_dir=tmp_path, compact_min_bytes=64 * 1024)
    try:
        write_some(emulator, table, bucket)
        _, s3 = clients(emulator)
        for number in range(4):
            s3.put_object(Bucket=bucket, Key=f"live/{number}", Body=MARKER)
        assert not emulator.compact_if_mostly_history()
        assert MARKER in (tmp_path / JOURNAL_NAME).read_bytes()
    finally:
        emulator.stop()


def test_writes_made_while_a_compaction_writes_its_file_are_kept(
    tmp_path: Path, names: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state is taken under moto's lock and written out without it; what is written
    meanwhile must follow it into the new journal."""
    table, bucket = names
    emulator = Emulator(data_dir=tmp_path, compact_min_bytes=1)
    try:
        write_some(emulator, table, bucket)
        write_history(emulator, table, bucket, rounds=2)
        dynamodb, s3 = clients(emulator)
        original = _journal.Journal.write_fresh

        def while_writing(journal: _journal.Journal, records: Any) -> Path:
            written = original(journal, records)

            # Requests from other threads, answered while the fresh file is being written.
            def requests() -> None:
                for number in range(20):
                    item = {"pk": {"S": "during"}, "sk": {"S": f"{number:02}"}}
                    dynamodb.put_item(TableName=table, Item=item)
                s3.put_object(Bucket=bucket, Key="during", Body=b"meanwhile")
                dynamodb.delete_item(TableName=table, Key={"pk": {"S": "p0"}, "sk": {"S": "s003"}})

            worker = threading.Thread(target=requests)
            worker.start()
            worker.join()
            return written

        monkeypatch.setattr(_journal.Journal, "write_fresh", while_writing)
        emulator.compact()
        held = contents(emulator, table, bucket)
        assert {"pk": {"S": "during"}, "sk": {"S": "19"}} in [
            {"pk": item["pk"], "sk": item["sk"]} for item in held[0]
        ]
        assert held[1]["during"] == b"meanwhile"
    finally:
        emulator.stop()
    assert_a_restart_holds(tmp_path, table, bucket, held)


# The steps a compaction takes, where a kill may land.
KILL_POINTS = ["writing the fresh file", "fresh file written", "before the rename", "renamed"]


def _compact_and_die(directory: Path, table: str, bucket: str, point: str, report: Path) -> None:
    """In a forked child: build the state, save what the emulator holds, and compact with a
    kill (`os._exit`) at `point`."""
    emulator = Emulator(data_dir=directory, compact_min_bytes=1)
    write_some(emulator, table, bucket)
    write_history(emulator, table, bucket, rounds=3)
    report.write_bytes(pickle.dumps(contents(emulator, table, bucket)))
    original_fresh = _journal.Journal.write_fresh
    original_replace = os.replace

    def fresh(journal: _journal.Journal, records: Any) -> Path:
        if point == "writing the fresh file":
            records = list(records)
            half = records[: len(records) // 2]
            path = original_fresh(journal, half)
            with path.open("ab") as file:
                file.write(records[len(half)].encode()[:100])  # a record cut short
            os._exit(9)
        path = original_fresh(journal, records)
        if point == "fresh file written":
            os._exit(9)
        return path

    def replace(source: Any, target: Any) -> None:
        if point == "before the rename":
            os._exit(9)
        original_replace(source, target)
        if point == "renamed":
            os._exit(9)

    _journal.Journal.write_fresh = fresh  # type: ignore[method-assign]
    _journal.os.replace = replace  # type: ignore[attr-defined]
    emulator.compact()
    os._exit(0)


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_kill_at_any_point_of_a_compaction_loses_nothing(
    tmp_path: Path, names: tuple[str, str], point: str
) -> None:
    table, bucket = names
    report = tmp_path / "held.pickle"
    data = tmp_path / "data"
    child = os.fork()
    if child == 0:  # pragma: no cover (the child always leaves through os._exit)
        try:
            _compact_and_die(data, table, bucket, point, report)
        finally:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 9, "the child did not die where it was told"
    held = pickle.loads(report.read_bytes())
    again = Emulator(data_dir=data)
    try:
        assert contents(again, table, bucket) == held
        assert not any(path.suffix == ".compacting" for path in data.iterdir())
        # Nothing deleted came back; a finished rename left only the state.
        if point == "renamed":
            assert MARKER not in (data / JOURNAL_NAME).read_bytes()
    finally:
        again.stop()


def test_a_replay_longer_than_a_second_says_how_far_it_got(
    tmp_path: Path, names: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    table, bucket = names
    first = Emulator(data_dir=tmp_path)
    write_some(first, table, bucket)
    first.stop()
    forget(table, bucket)
    clock = iter(range(0, 10_000, 1))  # each look at the clock: a second later
    monkeypatch.setattr(emulator_module.time, "monotonic", lambda: float(next(clock)))
    heard: list[Replay] = []
    again = Emulator(data_dir=tmp_path, progress=heard.append)
    again.stop()
    size = (tmp_path / JOURNAL_NAME).stat().st_size
    assert heard, "no progress was told"
    assert [r.records for r in heard] == sorted(r.records for r in heard)
    assert all(0 < r.read_bytes <= r.journal_bytes == size and r.seconds >= 1 for r in heard)
