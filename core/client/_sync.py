"""`DurableStream`: one stream URL, from synchronous code."""

# Generated from _async.py by scripts/unasync.py: do not edit; change _async.py and run
# `python3 scripts/unasync.py`.

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx

from . import _wire as wire
from ._attempts import Next, after_answer, after_check, after_failure
from ._base import DEFAULT_TIMEOUT, StreamBase, default_tls
from ._errors import DurableStreamError, OutcomeUnknown
from ._live import SILENT_END, Connection, SseHealth, live_transport
from ._offset import Offset
from ._sse import SseSession
from ._wire import Batch, Live, OnGone, Request, StreamInfo


class DurableStream(StreamBase):
    __doc__ = StreamBase.__doc__

    def __init__(
        self,
        url: str,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        client: httpx.Client | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, **options)
        self._client = client or httpx.Client(timeout=timeout, verify=default_tls())
        self._owns_client = client is None

    # ---------------------------------------------------------------- lifecycle

    def create(self, content_type: str = "application/octet-stream", **options: Any) -> StreamInfo:
        """Create the stream (200 when it exists with this configuration: not an error).
        Options: ttl, expires_at, closed, body, retention (sent as `Stream-Retention`:
        `"max-age=86400"`, `"max-bytes=1000000"`, both separated by `;`, or `"compact"`)."""
        response = self._send(wire.create_request(content_type, **options))
        return self._learn(wire.stream_info(response))

    def fork(self, source: str, *, offset: Offset | None = None, **options: Any) -> StreamInfo:
        """Create this stream as a fork of the stream at path `source` (up to `offset`)."""
        request = wire.create_request(
            options.pop("content_type", ""), forked_from=source, fork_offset=offset, **options
        )
        if not request.headers["Content-Type"]:
            del request.headers["Content-Type"]
        return self._learn(wire.stream_info(self._send(request)))

    def head(self) -> StreamInfo:
        return self._learn(wire.stream_info(self._send(Request("HEAD"))))

    def delete(self) -> None:
        """Delete the stream. A retry that finds it gone counts as done."""
        response, attempts = self._exchange(Request("DELETE"), check=False)
        if response.status_code == 404 and attempts > 1:
            return
        wire.raise_for_status(response)

    def close(
        self, final: bytes | str | list[Any] | None = None, *, content_type: str | None = None
    ) -> Offset:
        """Close the stream; returns its final offset. Without `final`, closing twice is not
        an error (so a lost answer is retried). With `final` (as for `append`), the message is
        written and the stream closed in one request, which is never retried blindly: it may
        raise `OutcomeUnknown` (an `IdempotentProducer`'s `close(final)` is safe to retry)."""
        if final is None:
            return self._wrote(wire.next_offset(self._send(wire.close_request())))
        return self.append(final, content_type=content_type, close=True)

    def append(
        self,
        data: bytes | str | list[Any],
        *,
        content_type: str | None = None,
        close: bool = False,
        stream_seq: str | None = None,
    ) -> Offset:
        """Append bytes, text, or (for a JSON stream) a list of values, one message each;
        returns the offset after the write. `stream_seq` is sent as `Stream-Seq`: the server
        refuses (`SequenceConflict`) a value not above the last it accepted, compared as
        strings (zero-pad numbers). An append is sent again only when the server cannot have
        applied it (no connection; 429; 503 with Retry-After; 500 or 503 with the tail unmoved);
        otherwise it raises `OutcomeUnknown` when it may have been applied without an answer."""
        if stream_seq is not None:
            wire.check_stream_seq(stream_seq)
        if content_type is None and not isinstance(data, list):
            content_type = self.content_type or self.head().content_type
        content_type, body = wire.append_body(data, content_type)
        request = wire.append_request(
            content_type, body, close=close, stream_seq=stream_seq, tail_before=self.tail
        )
        return self._wrote(wire.next_offset(self._send(request)))

    # ---------------------------------------------------------------- reads

    def read(
        self,
        offset: Offset = Offset.BEGINNING,
        *,
        live: Live = None,
        until: Offset | None = None,
        idle: bool = False,
        on_gone: OnGone = "raise",
        decode: bool = True,
    ) -> Iterator[Batch]:
        """Batches from `offset`. Without `live`, up to the tail; with `live="long-poll"`,
        `"sse"` or `"auto"` (catch up, then follow by whichever suits the stream), for ever,
        until the stream is closed (a dropped SSE connection is reconnected from the last
        offset). Every way, the iteration ends right after the batch whose `closed` is true,
        and never before the end of a closed stream. `until` (catch-up only; this server's
        extension) ends the read at that offset: a range reads the same every time; a server
        without the extension that answers past the bound gets `UntilNotSupported` raised,
        and nothing past the bound is handed over. With `idle`, a long-poll that ends without
        data yields an empty batch of status 204 (its `next_offset` says where the stream
        stands, or what `Offset.NOW` resolved to). When the stream's retention policy has
        dropped the data at the read's offset (at the start, or later when a slow reader falls
        behind), the read raises `OffsetGone`, naming the earliest offset still kept; with
        `on_gone="earliest"` it goes on from there instead, and the next batch's
        `skipped_from` says where it had been. With `decode=False` (catch-up and long-poll
        reads), a JSON stream's batches leave `messages` None: `data` holds the response's
        JSON array, for a caller that parses it its own way (the Spark source does)."""
        wire.check_read(live, until, on_gone, decode)
        if live == "sse":
            batches = self._read_sse(SseSession(offset, on_gone=on_gone))
        elif live == "auto":
            batches = self._read_auto(offset, idle, on_gone)
        else:
            session = wire.ReadSession(
                offset, live, until=until, idle=idle, on_gone=on_gone, decode=decode
            )
            batches = self._read_plain(session)
        yield from batches

    def _read_plain(self, session: wire.ReadSession) -> Iterator[Batch]:
        while not session.finished:
            batch = session.accept(self._send(session.request(), check=False))
            if batch is not None:
                yield batch

    def _read_auto(
        self, offset: Offset, idle: bool = False, on_gone: OnGone = "raise"
    ) -> Iterator[Batch]:
        catch_up = wire.ReadSession(offset, None, on_gone=on_gone)
        yield from self._read_plain(catch_up)
        if catch_up.closed:
            return
        if live_transport(catch_up.content_type) == "sse":
            sse = SseSession(catch_up.offset, catch_up.cursor, on_gone)
            sse.content_type = catch_up.content_type
            yield from self._read_sse(sse, fallback=True)
            if sse.finished:
                return
            catch_up = wire.ReadSession(sse.offset, None, sse.cursor, on_gone=on_gone)
            catch_up.content_type = sse.content_type
            catch_up.skipped_from = sse.skipped_from
        catch_up.follow()
        catch_up.idle = idle
        yield from self._read_plain(catch_up)

    def _read_sse(self, session: SseSession, fallback: bool = False) -> Iterator[Batch]:
        """Follow by SSE until the stream's end. Connections that end quickly without an event
        count as failures; with `fallback`, return early (unfinished) when SSE is refused or
        keeps failing that way, for the caller to go on another way."""
        health = SseHealth()
        content_type = session.content_type or self.content_type or self.head().content_type
        failures = 0
        while not session.finished:
            request = session.request()
            headers = wire.resolve_headers(self.headers)
            started, controls, offset = time.monotonic(), session.controls, session.offset
            answered, lost = False, SILENT_END
            try:
                with self._client.stream(
                    "GET", wire.target(self.url, request.params), headers=headers
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        if fallback and health.refused(response.status_code):
                            return
                        if session.restart(response):
                            continue
                        failures += 1
                        step = after_answer(self.retry, request, failures, response)
                        if step.accept:
                            wire.raise_for_status(response)
                        if step.error is not None:
                            raise step.error
                        time.sleep(step.pause or 0.0)
                        continue
                    answered = True
                    encoding = response.headers.get("Stream-SSE-Data-Encoding")
                    session.connected(content_type, encoding)
                    for chunk in response.iter_bytes():
                        yield from session.feed(chunk)
            except httpx.TransportError as failure:
                lost = failure
            if answered:
                progressed = session.finished or session.offset != offset
                told = session.controls > controls
                verdict = health.connection_ended(time.monotonic() - started, told, progressed)
                if fallback and health.given_up:
                    return
                if verdict is not Connection.SHORT:
                    failures = 0
                    continue
            failures += 1
            step = after_failure(self.retry, request, failures, lost)
            if step.error is not None:
                raise step.error from lost
            time.sleep(step.pause or 0.0)

    # ---------------------------------------------------------------- plumbing

    def _send(self, request: Request, check: bool = True) -> httpx.Response:
        response, _ = self._exchange(request, check)
        return response

    def _exchange(self, request: Request, check: bool = True) -> tuple[httpx.Response, int]:
        """The accepted answer to `request`, and how many attempts it took."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._client.request(
                    request.method,
                    wire.target(self.url, request.params),
                    headers={**wire.resolve_headers(self.headers), **request.headers},
                    content=request.content,
                )
            except httpx.TransportError as failure:
                step = after_failure(self.retry, request, attempt, failure)
                if step.error is not None:
                    raise step.error from failure
            else:
                step = after_answer(self.retry, request, attempt, response)
                if step.verify:
                    step = self._check(request, attempt)
                if step.error is not None:
                    raise step.error
                if step.accept:
                    if check:
                        wire.raise_for_status(response)
                    return response, attempt
            time.sleep(step.pause or 0.0)

    def _check(self, request: Request, attempt: int) -> Next:
        """After a 500 or 503 to a write: whether the stream's tail says it was not applied."""
        try:
            info = self.head()
        except DurableStreamError as failure:
            message = f"{request.method} {self.url} failed and the tail could not be read"
            return Next(error=OutcomeUnknown(f"{message}: {failure}"))
        return after_check(self.retry, request, attempt, self.url, info)

    def close_client(self) -> None:
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> DurableStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_client()
