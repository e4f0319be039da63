"""The delivery work items, and the two ways of scheduling them: an in-process timer queue
(`dsaws serve`) and SQS with per-message delays (the deployment)."""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Protocol

logger = logging.getLogger("dsaws.subscriptions")
SQS_MAX_DELAY_SECONDS = 900
# How long the in-process queue waits before running a failed task again.
RETRY_SECONDS = 5.0


class TaskKind(Enum):
    NOTICE = "notice"  # a stream got data: link it to matching subscriptions and wake them
    DELIVER = "deliver"  # POST a webhook wake (first attempt or a retry)
    EXPIRE = "expire"  # a lease may have run out
    # Link what a pattern matches now, and wake if work is pending: after a creation (for
    # instances with an older subscription list) and after a restart of `dsaws serve`.
    CHECK = "check"


@dataclass(frozen=True)
class Task:
    kind: TaskKind
    target: str  # a stream path for NOTICE, a subscription id otherwise
    generation: int = 0
    lease_end: float | None = None  # EXPIRE: the lease it times

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "kind": self.kind.value})

    @classmethod
    def from_json(cls, text: str) -> Task:
        raw = json.loads(text)
        lease_end = raw.get("lease_end")
        return cls(
            TaskKind(raw["kind"]),
            str(raw["target"]),
            int(raw.get("generation", 0)),
            None if lease_end is None else float(lease_end),
        )


class Scheduler(Protocol):
    def send(self, task: Task, delay: float = 0.0) -> None:
        """Run `task` once, no sooner than `delay` seconds from now (at least once)."""


class SqsScheduler:
    """Tasks as SQS messages: a delay is the message's DelaySeconds (whole seconds, rounded
    up; the longest lease plus the longest backoff stays under SQS's 15 minutes)."""

    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs = sqs
        self.queue_url = queue_url

    def send(self, task: Task, delay: float = 0.0) -> None:
        seconds = min(SQS_MAX_DELAY_SECONDS, max(0, math.ceil(delay)))
        self.sqs.send_message(
            QueueUrl=self.queue_url, MessageBody=task.to_json(), DelaySeconds=seconds
        )


class InProcessScheduler:
    """A timer queue on one thread: what `dsaws serve` runs instead of SQS. Notices waiting
    to run are merged, as a batch of SQS messages would be."""

    def __init__(
        self, run: Callable[[list[Task]], list[Task] | None], sweep_interval: float = 0.0
    ) -> None:
        self._run = run
        self._sweep_interval = sweep_interval
        self._heap: list[tuple[float, int, Task]] = []
        self._queued: set[Task] = set()
        self._counter = 0
        self._wakeup = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None
        # Rounds run on a few threads: one slow webhook must not hold back every other wake.
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="subscriptions")
        self.on_sweep: Callable[[], None] | None = None

    def send(self, task: Task, delay: float = 0.0) -> None:
        due = time.monotonic() + max(0.0, delay)
        with self._wakeup:
            if task.kind is TaskKind.NOTICE and delay == 0 and task in self._queued:
                return
            self._counter += 1
            heapq.heappush(self._heap, (due, self._counter, task))
            self._queued.add(task)
            self._wakeup.notify()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="subscriptions", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._wakeup:
            self._stopped = True
            self._wakeup.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        next_sweep = time.monotonic() + self._sweep_interval
        while True:
            with self._wakeup:
                while not self._stopped:
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    if self._sweep_interval and now >= next_sweep:
                        break
                    deadline = self._heap[0][0] if self._heap else now + 3600
                    if self._sweep_interval:
                        deadline = min(deadline, next_sweep)
                    self._wakeup.wait(deadline - now)
                if self._stopped:
                    return
                now = time.monotonic()
                due: list[Task] = []
                while self._heap and self._heap[0][0] <= now:
                    task = heapq.heappop(self._heap)[2]
                    self._queued.discard(task)
                    due.append(task)
            if due:
                self._submit(self._run, due)
            if self._sweep_interval and time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + self._sweep_interval
                if self.on_sweep is not None:
                    self._submit(self._sweep, [])

    def _sweep(self, _: list[Task]) -> None:
        if self.on_sweep is not None:
            self.on_sweep()
        return None

    def _submit(self, work: Callable[[list[Task]], list[Task] | None], tasks: list[Task]) -> None:
        with contextlib.suppress(RuntimeError):  # stopped meanwhile
            self._pool.submit(self._guarded, work, tasks)

    def _guarded(self, work: Callable[[list[Task]], list[Task] | None], tasks: list[Task]) -> None:
        """Run a round; what failed goes back in the queue, after a pause (as SQS would
        deliver it again). Never lets a failure end the thread."""
        try:
            failed = work(tasks) or []
        except Exception:
            logger.exception("subscription delivery round failed")
            failed = tasks
        for task in failed:
            self.send(task, RETRY_SECONDS)
