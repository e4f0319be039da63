"""The embedded S3 + DynamoDB emulator: moto's WSGI app behind one global lock, with fast paths
where moto is slow (`moto_patches`, on the moto versions they were tested with), reached
in-process or over a loopback port, and optionally kept on disk.

moto's DynamoDB is not thread-safe: two concurrent conditional writes can both succeed. Serving
every request under one lock makes it linearizable, which the store's correctness relies on.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from ._in_process import InProcessTransport, status_code
from ._journal import JOURNAL_NAME, Journal, JournalError, JournalInUse
from .moto_patches import patch_moto

__all__ = [
    "IN_PROCESS_ENDPOINT",
    "JOURNAL_NAME",
    "Emulator",
    "JournalError",
    "JournalInUse",
    "LockObserver",
    "LockUse",
]

# The endpoint in-process clients are configured with: never dialled (their requests are
# answered before botocore would open a connection). An address, not a name, so that S3 keeps
# path-style URLs as it does for the listening emulator.
IN_PROCESS_ENDPOINT = "http://127.0.0.1:9"
# A journal longer than this many records is compacted when the emulator starts.
COMPACT_AFTER_RECORDS = 10_000
# While it runs, a journal is compacted once it is this long and at least twice what the
# emulator holds: mostly history (deleted streams, chunks sealed into segments, the stream
# items each append rewrote).
COMPACT_MIN_BYTES = 64 * 1024 * 1024


class _QuietHandler(WSGIRequestHandler):
    disable_nagle_algorithm = True  # see infra.lambda_bridge: no delayed-ACK stalls

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


# moto's state is one per process, so is the lock that serialises every request to it.
_MOTO_LOCK = threading.Lock()
_UNAVAILABLE = "503 Service Unavailable"


@dataclass(frozen=True)
class LockUse:
    """One turn at moto's lock: who asked (the thread's name), for what (the action, `S3 PUT`
    for an S3 request, or a step of a compaction), when it asked, got and let go of the lock
    (`time.monotonic()`), and how much of that the journal's write took."""

    thread: str
    action: str
    requested: float
    acquired: float
    released: float
    journal_seconds: float = 0.0


class LockObserver(Protocol):
    def __call__(self, use: LockUse) -> None: ...


def _action(environ: dict[str, Any]) -> str:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return str(target).rsplit(".", 1)[-1]
    return f"S3 {environ.get('REQUEST_METHOD', '?')}"


class _LockedApp:
    """moto's app, one request at a time; with a journal, every request that may have changed
    something is journaled, with the status it got, before it is answered."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = _MOTO_LOCK
        self.journal: Any = None  # a `_journal.Journal`, set once replayed
        # The journaled requests that made or changed tables and buckets: a compaction writes
        # them out first, as they came.
        self.resources: list[Any] = []
        # Why requests are refused: the emulator stopped, or its journal could not be written
        # (memory now holds a change the journal lacks: nothing more may be acknowledged).
        self.refusal: str | None = None
        # Told of every turn at the lock (`Emulator.observe`); None, the usual case, costs
        # one test per request.
        self.observer: LockObserver | None = None
        # Called before every turn at the lock (`Emulator.pace`).
        self.before_turn: Callable[[], None] | None = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if self.refusal is not None:
            return _refuse(start_response, self.refusal)
        if self.before_turn is not None:
            self.before_turn()
        if self.observer is not None:
            return self._observed(self.observer, environ, start_response)
        return self._serve(environ, start_response)

    def _observed(
        self, observer: LockObserver, environ: dict[str, Any], start_response: Any
    ) -> Any:
        timing = _Timing(time.monotonic())
        try:
            return self._serve(environ, start_response, timing)
        finally:
            if timing.acquired:
                observer(
                    LockUse(
                        threading.current_thread().name,
                        _action(environ),
                        timing.requested,
                        timing.acquired,
                        time.monotonic(),
                        timing.journal_seconds,
                    )
                )

    def _serve(
        self, environ: dict[str, Any], start_response: Any, timing: _Timing | None = None
    ) -> Any:
        if self.journal is None:
            with self.lock:
                if timing is not None:
                    timing.acquired = time.monotonic()
                # Materialise the body inside the lock: moto builds it lazily in some paths.
                return list(self.app(environ, start_response))
        from ._journal import Record

        body = _request_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))  # known now, even for a chunked request
        answered: list[Any] = []

        def capture(status: str, headers: Any, *exc_info: Any) -> Any:
            answered.append((status, headers, exc_info))
            return lambda _: None

        with self.lock:
            if timing is not None:
                timing.acquired = time.monotonic()
            journal = self.journal
            if self.refusal is not None or journal is None:
                return _refuse(start_response, self.refusal or "the emulator has stopped")
            content = list(self.app(environ, capture))
            status = status_code(answered[0][0]) if answered else 500
            record = Record.of(environ, body, status)
            if record.changes_something:
                try:
                    if timing is None:
                        journal.append(record)
                    else:
                        writing = time.monotonic()
                        journal.append(record)
                        timing.journal_seconds = time.monotonic() - writing
                except OSError as error:
                    self.refusal = f"the journal could not be written: {error}"
                    return _refuse(start_response, self.refusal)
                if not record.changes_items:
                    self.resources.append(record)
        start_response(*answered[0][:2], *answered[0][2])
        return content


@dataclass
class _Timing:
    requested: float
    acquired: float = 0.0
    journal_seconds: float = 0.0


def _request_body(environ: dict[str, Any]) -> bytes:
    length = environ.get("CONTENT_LENGTH")
    if length:
        return bytes(environ["wsgi.input"].read(int(length)))
    if environ.get("wsgi.input_terminated"):  # chunked: the server marks where it ends
        return bytes(environ["wsgi.input"].read())
    return b""


def _refuse(start_response: Any, reason: str) -> list[bytes]:
    start_response(_UNAVAILABLE, [("Content-Type", "text/plain")])
    return [f"embedded emulator: {reason}".encode()]


def release_freed_memory() -> None:
    """Hand the memory a replay or a compaction freed back to the operating system. glibc
    keeps freed blocks below its mmap threshold (every item and object under 128 KiB) in the
    heap, so the server's resident size stayed at its high-water mark after a compaction."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: nothing to do
        return
    libc.malloc_trim(0)


@dataclass(frozen=True)
class Replay:
    """How far a replay of the journal has got."""

    records: int
    read_bytes: int
    journal_bytes: int
    seconds: float


def _call(app: Any, environ: dict[str, Any]) -> int:
    """Run one request through a WSGI app; returns the status code it answered (0: none)."""
    answered: list[str] = []
    list(app(environ, lambda status, headers, *_: answered.append(status)))
    return status_code(answered[0]) if answered else 0


class Emulator:
    """moto in this process: `connect` clients to it directly, or `start` it on a loopback port
    for other processes. With `data_dir`, what it holds survives restarts."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        middleware: Callable[[Any], Any] | None = None,
        data_dir: Path | None = None,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
        progress: Callable[[Replay], None] | None = None,
    ) -> None:
        """`middleware`, if given, wraps the WSGI app (benchmarks count calls with it).
        `progress` hears how a replay of the journal goes, every second after the first."""
        from moto.server import DomainDispatcherApplication, create_backend_app

        self._locked = _LockedApp(patch_moto(DomainDispatcherApplication(create_backend_app)))
        app: Any = self._locked if middleware is None else middleware(self._locked)
        self.app = app
        self._host, self._port = host, port
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.compact_min_bytes = compact_min_bytes
        self.progress = progress
        self._compacting = threading.Lock()
        if data_dir is not None:
            self._open_journal(data_dir)

    def _open_journal(self, data_dir: Path) -> None:
        journal = Journal(data_dir)
        try:
            # Under moto's lock, as every request: other emulators of the process share moto.
            with self._locked.lock:
                replayed = self._replay(journal)
                if replayed > COMPACT_AFTER_RECORDS or self._mostly_history(journal):
                    journal.rewrite(self._state_records())
        except BaseException:
            journal.close()
            raise
        self._locked.journal = journal
        release_freed_memory()

    def _state_records(self) -> list[Any]:
        """The requests that rebuild what the journal's tables and buckets hold now (under
        moto's lock)."""
        from ._journal import created_resources
        from ._state_records import item_records, object_records

        resources = self._locked.resources
        tables, buckets = created_resources(resources)
        return [*resources, *item_records(tables), *object_records(buckets)]

    def compact_if_mostly_history(self) -> bool:
        """Compact the journal if it is `compact_min_bytes` long or more and at least twice
        what the emulator holds; whether it did. Called after the background sweeps removed
        or rewrote something; weighing what the emulator holds takes moto's lock for about
        a millisecond per thousand items and objects. Safe beside requests: see `compact`."""
        journal = self._locked.journal
        if journal is None or journal.size() < self.compact_min_bytes:
            return False
        with self._turn("compaction: weigh the state"):
            if not self._mostly_history(journal):
                return False
        self.compact()
        return True

    def _mostly_history(self, journal: Any) -> bool:
        """Under moto's lock: whether the journal is long and twice what it rebuilds."""
        from ._journal import created_resources
        from ._state_records import held_bytes

        size = journal.size()
        if size < self.compact_min_bytes:
            return False
        return size >= 2 * held_bytes(*created_resources(self._locked.resources))

    def compact(self) -> None:
        """Rewrite the journal as the requests that rebuild the current state. The state is
        taken under moto's lock (the items encoded, the objects' bytes referenced), written
        out without it, and the records journaled meanwhile are added under the lock again
        before the rename: requests wait only for the state to be taken and for that tail.
        A crash at any point leaves either the old journal or the new one, whole."""
        with self._compacting:
            locked = self._locked
            with self._turn("compaction: take the state"):
                journal = locked.journal
                if journal is None:
                    return
                records = self._state_records()
                since = journal.size()
            fresh = journal.write_fresh(records)
            del records
            with self._turn("compaction: add the tail, rename"):
                if locked.journal is not journal:  # stopped meanwhile
                    fresh.unlink(missing_ok=True)
                    return
                journal.finish_rewrite(fresh, since)
        release_freed_memory()

    def observe(self, observer: LockObserver | None) -> None:
        """Tell `observer` of every turn at moto's lock from now on (None: stop): requests,
        with the time their journal write took, and the steps of a compaction. For finding
        what makes requests wait (`dsaws serve` with `DS_PAUSE_TRACE`)."""
        self._locked.observer = observer

    def pace(self, before_turn: Callable[[], None] | None) -> None:
        """Call `before_turn` in the calling thread before each of its turns at moto's lock
        (a request, or a step of a compaction), outside the lock: `dsaws serve` holds its
        background sweeps there while requests are being served (`core.storage.lockstep.
        Lockstep`). None: no longer."""
        self._locked.before_turn = before_turn

    @contextlib.contextmanager
    def _turn(self, action: str) -> Iterator[None]:
        """moto's lock, for work of the emulator's own (told to the observer as `action`)."""
        if self._locked.before_turn is not None:
            self._locked.before_turn()
        observer = self._locked.observer
        requested = time.monotonic()
        with self._locked.lock:
            acquired = time.monotonic()
            try:
                yield
            finally:
                if observer is not None:
                    name = threading.current_thread().name
                    observer(LockUse(name, action, requested, acquired, time.monotonic()))

    def _replay(self, journal: Journal) -> int:
        """Apply the journal's records in order, one read from the file at a time; how many.
        Keeps the resource records (a compaction writes them out first), and tells
        `progress` how far it got every second once it has taken longer than one."""
        started = time.monotonic()
        told = started + 1.0
        total = journal.size()
        number = 0
        for number, record in enumerate(journal.records(), start=1):
            status = _call(self._locked.app, record.wsgi_environ())
            if status != record.status:
                raise JournalError(
                    f"{journal.path}: record {number - 1} ({record.action or 'S3'}) answered "
                    f"{status} on replay, {record.status} when it was first made"
                )
            if not record.changes_items:
                self._locked.resources.append(record)
            if self.progress is not None and time.monotonic() >= told:
                told = time.monotonic() + 1.0
                self.progress(Replay(number, journal.position, total, time.monotonic() - started))
        return number

    def connect(self, client: Any) -> Any:
        """Answer every request of a boto3 `client` here, without a socket; returns it."""
        return InProcessTransport(self.app).attach(client)

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("the emulator is not listening: start() it first")
        return f"http://{self._server.host}:{self._server.port}"

    def start(self) -> Emulator:
        """Listen on the loopback port, for clients in other processes."""
        self._server = make_server(
            self._host, self._port, self.app, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        # A compaction under way finishes (or gives up) before the journal's lock is let go:
        # the next holder of the directory must not meet its file.
        with self._compacting, self._locked.lock:
            journal, self._locked.journal = self._locked.journal, None
            if journal is not None:
                self._locked.refusal = "the emulator has stopped"
                journal.close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
