"""`IdempotentProducer`: exactly-once appends into one stream, batched and pipelined.

The decisions are `_delivery.DeliveryTracker`'s; this module only cuts batches, sends the
requests it allows and tells it what came back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from . import _wire as wire
from ._async import AsyncDurableStream
from ._delivery import Answer, DeliveryTracker, ProducerBatch, Send
from ._errors import DurableStreamError
from ._offset import Offset
from ._retry import RetryPolicy


class ProducerError(DurableStreamError):
    """Some batches were not delivered; `lost` says which messages and why. Nothing reported
    lost was acknowledged, and nothing acknowledged is reported lost (a batch given up after
    lost answers may nonetheless be in the stream: `unconfirmed` counts those)."""

    def __init__(self, lost: list[ProducerBatch]) -> None:
        self.lost = list(lost)
        messages = sum(b.messages for b in lost)
        first = min(lost, key=lambda b: (b.epoch, b.seq))
        self.unconfirmed = sum(b.messages for b in lost if b.maybe_committed)
        super().__init__(
            f"{messages} message(s) in {len(lost)} batch(es) not delivered; the first "
            f"(epoch {first.epoch}, seq {first.seq}): {first.lost_because}"
        )


@dataclass(frozen=True)
class ProducerSettings:
    linger: float = 0.005  # seconds a batch waits for more messages
    max_batch_bytes: int = 1024 * 1024
    max_in_flight: int = 5
    max_buffered_bytes: int = 16 * 1024 * 1024  # append() waits above this
    auto_claim: bool = False
    retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(max_attempts=10, base_delay=0.05, max_delay=5.0)
    )

    def __post_init__(self) -> None:
        # Refused here, at construction: a zero batch size or in-flight limit would only show
        # up later as a producer that never sends.
        if not self.linger >= 0:
            raise ValueError(f"linger must be >= 0 seconds, not {self.linger!r}")
        for name in ("max_batch_bytes", "max_in_flight", "max_buffered_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")


class IdempotentProducer:
    """Appends to `stream` as producer `producer_id` at `epoch` (bump it when the producer
    restarts, or set `auto_claim` to take over from a fenced epoch)."""

    def __init__(
        self,
        stream: AsyncDurableStream,
        producer_id: str,
        *,
        epoch: int = 0,
        settings: ProducerSettings | None = None,
    ) -> None:
        check_producer(producer_id, epoch)
        self.stream = stream
        self.producer_id = producer_id
        self.settings = settings or ProducerSettings()
        self._tracker = DeliveryTracker(
            epoch=epoch,
            auto_claim=self.settings.auto_claim,
            max_in_flight=self.settings.max_in_flight,
            max_attempts=self.settings.retry.max_attempts,
        )
        self._pieces: list[bytes] = []
        self._piece_bytes = 0
        self._cuts = 0  # batches cut so far: a linger task lingers over the batch after this
        self._content_type: str | None = None
        self._json: bool | None = None  # whether the stream is JSON, once known
        self._outstanding = 0  # bytes in batches cut and not yet answered (as of the last pump)
        self._changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_offset: Offset | None = None
        self._stopped = False
        self._closed = False  # this producer closed the stream

    # ---------------------------------------------------------------- public

    async def append(self, value: Any) -> None:
        """Queue one message: bytes or text, or any JSON value for a JSON stream (refused here
        if it is not JSON). Empty bytes or text add nothing to a byte stream and are not sent.
        Waits while too much is buffered."""
        if self._json is None:
            await self._stream_type()
        piece = _encode(value, bool(self._json))
        async with self._changed:
            if self._stopped:
                raise DurableStreamError("the producer has been closed or detached")
            if not piece:
                return
            limit = self.settings.max_buffered_bytes
            if self._buffered() + len(piece) > limit:
                await self._changed.wait_for(
                    lambda: self._buffered() + len(piece) <= limit or self._buffered() == 0
                )
            self._pieces.append(piece)
            self._piece_bytes += len(piece)
            starts_batch = len(self._pieces) == 1
            if self._piece_bytes >= self.settings.max_batch_bytes:
                self._cut()
                self._pump()
            elif starts_batch:
                self._spawn(self._linger(self._cuts))

    async def extend(self, values: Iterable[Any]) -> None:
        """`append` each value in turn (one call for many messages: a synchronous caller
        crosses to the producer's thread once, not once per message)."""
        for value in values:
            await self.append(value)

    async def flush(self) -> Offset | None:
        """Deliver everything appended so far; returns the offset after it. Raises
        `ProducerError` naming every batch that could not be delivered."""
        async with self._changed:
            self._cut()
            self._pump()
            await self._changed.wait_for(lambda: self._tracker.idle and not self._pieces)
            if self._tracker.lost:
                raise ProducerError(self._tracker.lost)
            return self._last_offset

    async def close(self, final: Any = None) -> Offset | None:
        """Flush, then close the stream (with `final` as its last message), as part of the
        producer's sequence, so a retried close is deduplicated. Refuses to close over a
        failed batch. Once it has closed the stream, closing again returns the same offset
        (and sends nothing: another close would be a new request on a closed stream)."""
        if self._closed:
            return self._last_offset
        await self.flush()
        await self._stream_type()
        json_stream = bool(self._json)
        body = (
            b"" if final is None else wire.join_bodies([_encode(final, json_stream)], json_stream)
        )
        async with self._changed:
            self._stopped = True
            self._tracker.enqueue(ProducerBatch(body, 0 if final is None else 1, close=True))
            self._pump()
            await self._changed.wait_for(lambda: self._tracker.idle)
            self._stop_lingering()
            if self._tracker.lost:
                raise ProducerError(self._tracker.lost)
            self._closed = True
            return self._last_offset

    async def detach(self) -> None:
        """Stop without closing the stream; whatever is buffered is delivered first."""
        await self.flush()
        self._stopped = True
        self._stop_lingering()

    def _stop_lingering(self) -> None:
        """Once stopped and idle, only linger timers are left, for batches already cut: they
        would keep the event loop (and a `SyncIdempotentProducer`'s thread) from ending."""
        for task in list(self._tasks):
            task.cancel()

    # ---------------------------------------------------------------- batching

    def _buffered(self) -> int:
        return self._piece_bytes + self._outstanding

    def _cut(self) -> None:
        if not self._pieces:
            return
        body = wire.join_bodies(self._pieces, bool(self._json))
        self._tracker.enqueue(ProducerBatch(body, len(self._pieces)))
        self._pieces, self._piece_bytes = [], 0
        self._cuts += 1

    async def _linger(self, cuts: int) -> None:
        """Cut the batch begun after cut number `cuts`, unless it has been cut meanwhile (by
        size or a flush). Comparing batches, not clock readings, so a sleep that wakes a little
        early cannot leave a batch unsent."""
        await asyncio.sleep(self.settings.linger)
        async with self._changed:
            if self._cuts == cuts:
                self._cut()
                self._pump()

    # ---------------------------------------------------------------- sending

    def _pump(self) -> None:
        """After every change of the state: send what may go, and wake whoever waits."""
        for send in self._tracker.sendable():
            self._spawn(self._deliver(send))
        waiting = sum(len(b.body) for b in self._tracker.waiting)
        self._outstanding = waiting + sum(len(b.body) for b in self._tracker.in_flight.values())
        self._changed.notify_all()

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, send: Send) -> None:
        outcome = await self._attempt(send)
        if outcome.pause:
            await asyncio.sleep(outcome.pause)
        async with self._changed:
            offset = outcome.offset
            if offset is not None and (self._last_offset is None or self._last_offset < offset):
                self._last_offset = offset
            self._tracker.answer(
                send,
                outcome.answer,
                server_epoch=outcome.server_epoch,
                server_seq=outcome.server_seq,
                reason=outcome.reason,
            )
            self._pump()

    async def _attempt(self, send: Send) -> Outcome:
        producer = {
            "Producer-Id": self.producer_id,
            "Producer-Epoch": str(send.epoch),
            "Producer-Seq": str(send.seq),
        }
        request = wire.append_request(
            self._content_type or "", send.batch.body, close=send.batch.close, producer=producer
        )
        retry = self.settings.retry
        try:
            response = await self.stream._client.post(
                self.stream.url,
                content=request.content,
                headers={**wire.resolve_headers(self.stream.headers), **request.headers},
            )
        except httpx.ConnectError as exc:
            return Outcome(Answer.UNDELIVERED, retry.delay(send.batch.attempts), reason=str(exc))
        except httpx.TransportError as exc:
            return Outcome(Answer.TRANSIENT, retry.delay(send.batch.attempts), reason=str(exc))
        return _judge(response, retry, send.batch.attempts)

    async def _stream_type(self) -> str:
        """The stream's content type, looked up once; `_json` is set with it."""
        if self._content_type is None:
            self._content_type = self.stream.content_type or (await self.stream.head()).content_type
            self._json = wire.is_json(self._content_type)
        return self._content_type


@dataclass(frozen=True)
class Outcome:
    answer: Answer
    pause: float = 0.0  # before the state hears of it (a retry's backoff)
    server_epoch: int | None = None
    server_seq: int | None = None  # the highest sequence the server holds for this epoch
    offset: Offset | None = None
    reason: str = ""


def _judge(response: httpx.Response, retry: RetryPolicy, attempt: int) -> Outcome:
    status = response.status_code
    reason = f"{status} {response.text[:200]}".strip()
    pause = retry.delay(attempt, response.headers.get("Retry-After"))
    if status in (200, 204):
        offset = response.headers.get("Stream-Next-Offset")
        seq = response.headers.get("Producer-Seq", "")
        return Outcome(
            Answer.ACKED,
            server_seq=int(seq) if seq.isdigit() else None,
            offset=Offset(offset) if offset else None,
        )
    if status == 403:
        epoch = response.headers.get("Producer-Epoch")
        if epoch is not None and epoch.isdigit():
            return Outcome(Answer.STALE_EPOCH, server_epoch=int(epoch), reason=reason)
        # Access control refused it (the token, a signed URL, a locked origin): retrying the
        # same request cannot succeed.
        return Outcome(Answer.REFUSED, reason=reason)
    closed = response.headers.get("Stream-Closed", "").lower() == "true"
    if status == 409 and not closed and response.headers.get("Producer-Expected-Seq"):
        return Outcome(Answer.SEQUENCE_GAP, reason=reason)
    if status == 429:
        return Outcome(Answer.UNDELIVERED, pause, reason=reason)
    if status >= 500:
        return Outcome(Answer.TRANSIENT, pause, reason=reason)
    return Outcome(Answer.REFUSED, reason=reason)


def check_producer(producer_id: object, epoch: object) -> None:
    """A producer's identity as the protocol carries it: a non-empty id, an epoch >= 0."""
    if not isinstance(producer_id, str) or not producer_id:
        raise ValueError(f"producer_id must be a non-empty string, not {producer_id!r}")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be an integer >= 0, not {epoch!r}")


def _encode(value: Any, json_stream: bool) -> bytes:
    if json_stream:
        return wire.encode_json(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)  # a copy: the caller may reuse its buffer
    raise TypeError(f"a {type(value).__name__} cannot be appended to a byte stream")


class SyncIdempotentProducer:
    """`IdempotentProducer` for synchronous code: the producer runs on an event loop in a
    thread of its own; every method blocks until its coroutine there has finished."""

    def __init__(
        self,
        url: str,
        producer_id: str,
        *,
        epoch: int = 0,
        settings: ProducerSettings | None = None,
        **stream_options: Any,
    ) -> None:
        # Checked before a thread is started for a producer that cannot work.
        check_producer(producer_id, epoch)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

        async def build() -> IdempotentProducer:
            stream = AsyncDurableStream(url, **stream_options)
            return IdempotentProducer(stream, producer_id, epoch=epoch, settings=settings)

        self._producer = self._call(build())

    def append(self, value: Any) -> None:
        self._call(self._producer.append(value))

    def extend(self, values: Iterable[Any]) -> None:
        # Taken here: the caller's iterator is not read from the producer's thread.
        self._call(self._producer.extend(list(values)))

    def flush(self) -> Offset | None:
        return self._call(self._producer.flush())

    def close(self, final: Any = None) -> Offset | None:
        try:
            return self._call(self._producer.close(final))
        finally:
            self._shutdown()

    def detach(self) -> None:
        try:
            self._call(self._producer.detach())
        finally:
            self._shutdown()

    def _call(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def _shutdown(self) -> None:
        if self._loop.is_running():
            self._call(self._producer.stream.close_client())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> SyncIdempotentProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()
