"""A record of what can make a request of `dsaws serve` wait, for finding latency spikes
(`DS_PAUSE_TRACE`: the file it is written to as the server stops; `benchmarks/append_spikes.py`
reads it).

Every event carries `time.monotonic()` times: on Linux that clock is the machine's, so a
client in another process can lay its own timings beside them. Events are kept in memory
(appending to a list is one atomic step under the interpreter lock, from any thread) and
written as JSON lines by `close`, so tracing adds no I/O to the requests it watches. Off (the
default) none of this is installed and nothing is recorded.

Kinds of event:
- `request`: a request's method, path, status, start and end (its response's last byte), and
  the CPU time of the event loop's thread meanwhile (far below the wall time with no other
  thread of the server busy: the machine ran something else);
- `gc`: a collection of Python's garbage collector: generation, thread, start, seconds,
  objects collected (it stops every thread);
- `lock`: a turn at the embedded emulator's lock (an AWS call, or a step of a compaction):
  thread, action, requested, acquired, released, and the journal write's share;
- `sweep`: a run of the background sealer or collector: when it was due, when it started
  (after waiting for a quiet server), ended, its thread's CPU seconds and its report.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .storage.background import SweepRun


class LockUse(Protocol):
    """What the embedded emulator reports of a turn at its lock (`infra.emulator.LockUse`)."""

    @property
    def thread(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def requested(self) -> float: ...
    @property
    def acquired(self) -> float: ...
    @property
    def released(self) -> float: ...
    @property
    def journal_seconds(self) -> float: ...


class PauseTrace:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._collecting: dict[int, float] = {}  # thread id -> when its collection began

    def lock(self, use: LockUse) -> None:
        self.events.append(
            {
                "kind": "lock",
                "thread": use.thread,
                "action": use.action,
                "requested": use.requested,
                "acquired": use.acquired,
                "released": use.released,
                "journal_seconds": use.journal_seconds,
            }
        )

    def collection(self, phase: str, info: dict[str, int]) -> None:
        """A `gc.callbacks` entry."""
        thread = threading.get_ident()
        if phase == "start":
            self._collecting[thread] = time.monotonic()
            return
        started = self._collecting.pop(thread, None)
        if started is None:
            return
        self.events.append(
            {
                "kind": "gc",
                "thread": threading.current_thread().name,
                "generation": info["generation"],
                "start": started,
                "seconds": time.monotonic() - started,
                "collected": info.get("collected", 0),
            }
        )

    def sweep(self, run: SweepRun) -> None:
        self.events.append(
            {
                "kind": "sweep",
                "name": run.name,
                "due": run.due,
                "start": run.started,
                "swept": run.swept,
                "end": run.ended,
                "thread_cpu": run.thread_cpu,
                "report": run.report,
            }
        )

    def around(self, app: ASGIApp) -> ASGIApp:
        """`app`, its requests recorded."""

        async def traced(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            event: dict[str, Any] = {
                "kind": "request",
                "method": scope["method"],
                "path": scope["path"],
                "start": time.monotonic(),
                "status": 0,
            }
            cpu = time.thread_time()

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    event["status"] = message["status"]
                await send(message)

            try:
                await app(scope, receive, sending)
            finally:
                event["end"] = time.monotonic()
                event["cpu"] = time.thread_time() - cpu
                self.events.append(event)

        return traced

    def close(self) -> None:
        """Write what was recorded (once: later events are dropped)."""
        events, self.events = self.events, []
        with self.path.open("w") as file:
            for event in events:
                file.write(json.dumps(event) + "\n")


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The events of a trace file, in the order they were recorded."""
    return [json.loads(line) for line in path.read_text().splitlines() if line]
