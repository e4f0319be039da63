"""Catching up on an open stream through the CDN: what a reader costs the origin in bytes.

A read from a stream's start may fill a whole response (the front door's limit, about 6 MB
inside Lambda), so that clients that make exactly one request get a whole stream; every other
read carries `max_read_bytes` (1 MiB). This measures what that costs behind a CDN. The origin
runs in-process on the embedded emulator with Lambda's response limit, the local CDN (nginx,
configured like the CloudFront distribution) in front; streams of several sizes are written in
16 KiB appends and stay open; readers arrive one after another, each reading from the start
until up to date through the CDN, while a writer appends a little between readers (the stream
keeps growing, so the answer that reaches its tail is never cacheable). Printed per stream
size, with reads from the start capped at 1 MiB (the behaviour before) and at the default:
origin bytes and requests per reader, and how many responses a reader needed.

    python -m benchmarks.catch_up_cdn [--sizes-mib 0.7 2.5 5.5 12.3 14.7] [--readers 10]
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from benchmarks._processes import free_port
from durable_streams_aws.core.cdn import LocalCdn, install_nginx
from durable_streams_aws.core.config import MIB, Settings
from durable_streams_aws.core.runtime import (
    build_backend,
    ensure_resources,
    use_emulator_credentials,
)
from durable_streams_aws.infra.emulator import Emulator

APPEND_BYTES = 16 * 1024


class OriginBytes:
    """Counts the body bytes and requests of the reads that reach the origin."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.bytes = 0
        self.reads = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        self.reads += 1

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.body":
                self.bytes += len(message.get("body", b""))
            await send(message)

        await self.app(scope, receive, counted)


@dataclass
class Row:
    size_mib: float
    mode: str
    origin_mib_per_reader: float
    origin_reads_per_reader: float
    responses_per_reader: float


@contextlib.contextmanager
def origin(**settings: object) -> Iterator[tuple[OriginBytes, str, str]]:
    """The origin with `settings`, counted, and the local CDN in front: (counter, origin URL,
    CDN URL)."""
    install_nginx()
    use_emulator_credentials()
    with Emulator() as emulator:
        suffix = uuid.uuid4().hex[:10]
        config = Settings(table=f"catch-{suffix}", bucket=f"catch-{suffix}", **settings)
        backend = build_backend(config, endpoint=emulator.endpoint)
        ensure_resources(backend)
        counter = OriginBytes(backend.app())
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(counter, host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        try:
            with LocalCdn(free_port(), port) as cdn:
                yield counter, f"http://127.0.0.1:{port}/v1/stream", f"{cdn.base_url}/v1/stream"
        finally:
            server.should_exit = True
            thread.join(timeout=10)


def catch_up(client: httpx.Client, url: str) -> tuple[bytes, int]:
    """Everything from the start until up to date, and how many responses that took."""
    data, offset, responses = b"", "-1", 0
    while True:
        answer = client.get(url, params={"offset": offset})
        answer.raise_for_status()
        data += answer.content
        responses += 1
        offset = answer.headers["stream-next-offset"]
        if answer.headers.get("stream-up-to-date") == "true":
            return data, responses


def measure(size_mib: float, readers: int, from_start_bytes: int | None, mode: str) -> Row:
    rig = origin(max_read_from_start_bytes=from_start_bytes)
    with rig as (counter, origin_url, cdn_url), httpx.Client(timeout=60) as client:
        url = f"{origin_url}/s"
        client.headers["Content-Type"] = "application/octet-stream"
        client.put(url).raise_for_status()
        written = b""
        while len(written) < size_mib * MIB:
            part = bytes([len(written) // APPEND_BYTES % 251]) * APPEND_BYTES
            client.post(url, content=part).raise_for_status()
            written += part
        counter.bytes = counter.reads = 0
        responses = 0
        for reader in range(readers):
            data, taken = catch_up(client, f"{cdn_url}/s")
            if data != written:
                raise SystemExit(f"reader {reader} read {len(data)} bytes, not {len(written)}")
            responses += taken
            part = bytes([reader % 251]) * 100
            client.post(url, content=part).raise_for_status()  # the stream goes on
            written += part
    return Row(
        size_mib,
        mode,
        counter.bytes / readers / MIB,
        counter.reads / readers,
        responses / readers,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-mib", type=float, nargs="+", default=[0.7, 2.5, 5.5, 12.3, 14.7])
    parser.add_argument("--readers", type=int, default=10)
    args = parser.parse_args()
    print(f"{args.readers} readers in turn, each from the start to up to date through nginx")
    print(
        "| stream | reads from the start | origin MiB per reader | origin reads per reader "
        "| responses per reader |"
    )
    print("| ---: | --- | ---: | ---: | ---: |")
    for size in args.sizes_mib:
        for from_start, mode in ((MIB, "capped at 1 MiB (before)"), (None, "whole (now)")):
            row = measure(size, args.readers, from_start, mode)
            print(
                f"| {size:g} MiB | {row.mode} | {row.origin_mib_per_reader:.2f} "
                f"| {row.origin_reads_per_reader:.1f} | {row.responses_per_reader:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
