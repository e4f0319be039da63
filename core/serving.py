"""What `dsaws serve` runs beside its app: the background sealer and collector, the garbage
collector's policy that keeps it from pausing the server, and its exit on a termination
signal."""

from __future__ import annotations

import gc
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp

from .config import Settings
from .http.middleware import RequestActivity
from .pause_trace import PauseTrace
from .runtime import retention_run, seal_policy
from .storage import Collector, DynamoStore, Sealer
from .storage.background import (
    BackgroundCollector,
    BackgroundSealer,
    BackgroundSweep,
    QuietWait,
)
from .storage.lockstep import Lockstep
from .storage.sealer import DELETE_THREADS

# The chunk items one Query of the sealer reads on the embedded emulator: 0.9 ms at the median
# with the emulator's lock held, a step that an append arriving during it waits for (pages of
# 50 took 1.4 ms); a 1 MB page of a stream's few thousand chunks took up to 384 ms.
EMBEDDED_PAGE_ITEMS = 20
# The items one Scan or Query of the collector reads there (its scan for deleted and expired
# streams reads every chunk too, and drops it): a 1 MB page held the lock 60 to 160 ms.
EMBEDDED_SCAN_ITEMS = 200


@dataclass(frozen=True)
class Serving:
    asgi: ASGIApp  # what uvicorn runs
    sealing: BackgroundSealer | None  # started; None when DS_SEAL_INTERVAL is 0
    collecting: BackgroundCollector | None = None  # started; None when DS_COLLECT_INTERVAL is 0
    retaining: BackgroundSweep | None = None  # started; None when DS_RETENTION_INTERVAL is 0
    # What the embedded emulator calls before each turn at its lock (`Emulator.pace`): the
    # sweeps take turns with the requests. None without the embedded emulator or sweeps.
    lockstep: Lockstep | None = None

    def stop(self) -> None:
        for sweep in (self.sealing, self.collecting, self.retaining):
            if sweep is not None:
                sweep.stop()


def prepare(
    app: ASGIApp,
    settings: Settings,
    store: DynamoStore,
    embedded: bool,
    compact: Callable[[], None] | None = None,
    trace: PauseTrace | None = None,
) -> Serving:
    """`embedded`: the store is the emulator in this process. It answers one request at a
    time, so parallel deletes would only queue at its lock ahead of the readers, and a sweep
    waits for a quiet server, then takes turns with the requests in short steps (`lockstep`,
    which the caller hands to `Emulator.pace`): it competes with them for that lock and for
    the interpreter, which halved the rate of a catch-up read it met and made appends wait
    up to hundreds of milliseconds. `compact`: what to run after
    a sweep removed or rewrote something (the embedded emulator's journal compaction, which
    decides whether the journal is now mostly history). `trace`: where requests, collections
    and sweeps are recorded (`DS_PAUSE_TRACE`)."""
    keep_collections_short()
    listener = None
    if trace is not None:
        gc.callbacks.append(trace.collection)
        app = trace.around(app)
        listener = trace.sweep
    quiet = lockstep = None
    intervals = (settings.seal_interval, settings.collect_interval, settings.retention_interval)
    if embedded and any(interval > 0 for interval in intervals):
        activity = RequestActivity()
        quiet = QuietWait(activity.idle_for)
        lockstep = Lockstep(activity)
        app = activity.around(app)
    sealing = None
    if settings.seal_interval > 0:
        deletes = 1 if embedded else DELETE_THREADS
        page = EMBEDDED_PAGE_ITEMS if embedded else None
        sealer = Sealer(store, seal_policy(settings), delete_threads=deletes, page_items=page)
        sealing = BackgroundSealer(
            sealer,
            settings.seal_interval,
            quiet,
            after=compact,
            listener=listener,
            lockstep=lockstep,
        ).start()
    collecting = None
    if settings.collect_interval > 0:
        collector = Collector(
            store,
            orphan_grace_seconds=settings.collect_grace_seconds,
            page_items=EMBEDDED_SCAN_ITEMS if embedded else None,
        )
        collecting = BackgroundCollector(
            collector,
            settings.collect_interval,
            quiet,
            after=compact,
            listener=listener,
            lockstep=lockstep,
        ).start()
    retaining = None
    if settings.retention_interval > 0:
        retaining = BackgroundSweep(
            "retention",
            retention_run(store, settings).run,
            settings.retention_interval,
            quiet,
            after=compact,
            listener=listener,
            lockstep=lockstep,
        ).start()
    return Serving(app, sealing, collecting, retaining=retaining, lockstep=lockstep)


def exit_on_termination() -> None:
    """SIGTERM and SIGHUP end the server as Ctrl-C does, through every `finally` (the local
    CDN's directory, which holds the origin secret and signed URLs in its log, the emulator's
    journal). uvicorn handles them while it serves, then raises the signal again with the
    handler that was there before: by default that killed the process outright."""

    def leave(signum: int, _: object) -> None:
        raise SystemExit(128 + signum)

    for each in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, leave)


class FreezeAfterSlowCollections:
    """A gc callback: what survived a full collection that took more than `slow` seconds of
    its thread's CPU is frozen, so later collections leave it out; at most once per `every`
    seconds, since a freeze also keeps whatever other threads made garbage meanwhile."""

    def __init__(
        self, slow: float = 0.02, every: float = 5.0, freeze: Callable[[], None] = gc.freeze
    ) -> None:
        self.slow = slow
        self.every = every
        self.freeze = freeze
        self._started = 0.0
        self._frozen_at = -every

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.thread_time()
            return
        now = time.monotonic()
        if time.thread_time() - self._started > self.slow and now - self._frozen_at >= self.every:
            self._frozen_at = now
            self.freeze()


def keep_collections_short() -> None:
    """The server's modules, app and clients (and the embedded emulator's tables, replayed
    from its journal) are some 165,000 objects that live as long as the process, and each full
    collection scanned them all: pauses of 45 to 160 ms every few seconds under the HTTP
    benchmark, each finding a few hundred objects of garbage. They are frozen once, before the
    server starts, and again what a slow full collection finds alive as the emulator's tables
    grow: later collections scan only what is newer. Frozen objects are still freed by
    reference counting; only cyclic garbage among them stays, which long-lived objects rarely
    make (moto's items and objects make none)."""
    gc.collect()
    gc.freeze()
    if not any(isinstance(each, FreezeAfterSlowCollections) for each in gc.callbacks):
        gc.callbacks.append(FreezeAfterSlowCollections())
