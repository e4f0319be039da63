"""The sync and the async client behind one blocking interface, so that every behaviour test
runs against both (`_sync.py` is generated from `_async.py`, and a test run on one only would
let a difference between them pass unseen)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any, Literal, cast

import httpx

from durable_streams_aws.client import AsyncDurableStream, Batch, DurableStream

Flavour = Literal["sync", "async"]
FLAVOURS: list[Flavour] = ["sync", "async"]


class BlockingAsyncStream:
    """An `AsyncDurableStream` with `DurableStream`'s interface: each call runs to its end on an
    event loop of the stream's own (so it may be used from any one thread, like a sync one)."""

    def __init__(self, url: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._stream = AsyncDurableStream(url, **options)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._stream, name)
        if not inspect.iscoroutinefunction(value):
            return value
        return lambda *args, **kwargs: self._loop.run_until_complete(value(*args, **kwargs))

    def read(self, *args: Any, **kwargs: Any) -> Iterator[Batch]:
        batches = self._stream.read(*args, **kwargs)
        try:
            while True:
                try:
                    yield self._loop.run_until_complete(anext(batches))
                except StopAsyncIteration:
                    return
        finally:
            if not self._loop.is_closed():
                self._loop.run_until_complete(batches.aclose())  # type: ignore[attr-defined]

    def close_client(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._stream.close_client())
            self._loop.close()

    def __enter__(self) -> BlockingAsyncStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_client()


class StreamOpener:
    """Opens streams of one flavour (`sync` or `async`), on `transport` if given (a scripted
    server), and closes what it opened at the end of the test."""

    def __init__(self, flavour: Flavour) -> None:
        self.flavour = flavour
        self._opened: list[DurableStream | BlockingAsyncStream] = []

    def __call__(
        self, url: str, *, transport: httpx.MockTransport | None = None, **options: Any
    ) -> DurableStream:
        stream: DurableStream | BlockingAsyncStream
        if self.flavour == "sync":
            if transport is not None:
                options["client"] = httpx.Client(transport=transport)
            stream = DurableStream(url, **options)
        else:
            if transport is not None:
                options["client"] = httpx.AsyncClient(transport=transport)
            stream = BlockingAsyncStream(url, **options)
        self._opened.append(stream)
        return cast(DurableStream, stream)  # either way, DurableStream's interface

    def close_all(self) -> None:
        for stream in self._opened:
            stream.close_client()
