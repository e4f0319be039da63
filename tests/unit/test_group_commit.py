"""Group commit's queue: every append answered once, by a batch it was in, never waiting for
more than the batch after its own; a failing batch fails only its own appends."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from durable_streams_aws.core.storage._group import MAX_BATCH, GroupCommits, Waiting


def test_every_request_is_answered_by_the_batch_it_was_in() -> None:
    group = GroupCommits()
    batches: list[list[int]] = []
    lock = threading.Lock()

    def commit(path: str, batch: Sequence[Waiting]) -> None:
        time.sleep(0.002)  # long enough for others to queue behind
        with lock:
            batches.append([w.request for w in batch])
        for waiting in batch:
            waiting.answer = waiting.request * 10

    answers: dict[int, int] = {}

    def ask(number: int) -> None:
        answers[number] = group.submit("s", number, commit)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == {n: n * 10 for n in range(200)}
    seen = [n for batch in batches for n in batch]
    assert sorted(seen) == list(range(200)), "an append committed twice, or never"
    assert max(len(b) for b in batches) <= MAX_BATCH
    assert len(batches) < 200, "nothing was ever committed together"
    assert group.active() == 0


def test_a_failing_batch_fails_its_own_appends_only() -> None:
    group = GroupCommits()
    first_in = threading.Event()
    release = threading.Event()

    def commit(path: str, batch: Sequence[Waiting]) -> None:
        if any(w.request == "first" for w in batch):
            first_in.set()
            release.wait(5)
            raise RuntimeError("the store is down")
        for waiting in batch:
            waiting.answer = "ok"

    errors: list[BaseException] = []

    def first() -> None:
        try:
            group.submit("s", "first", commit)
        except RuntimeError as error:
            errors.append(error)

    leader = threading.Thread(target=first)
    leader.start()
    assert first_in.wait(5)
    later: list[str] = []
    follower = threading.Thread(target=lambda: later.append(group.submit("s", "second", commit)))
    follower.start()
    time.sleep(0.05)
    release.set()
    leader.join(5)
    follower.join(5)
    assert [str(e) for e in errors] == ["the store is down"]
    assert later == ["ok"]
    with pytest.raises(RuntimeError):
        group.submit("t", "x", lambda p, b: (_ for _ in ()).throw(RuntimeError("x")))
    assert group.active() == 0
