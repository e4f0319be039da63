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
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

from benchmarks._reads import read_from_start
from benchmarks._report import print_table
from benchmarks.cdn_fanout import rig
from durable_streams_aws.core.config import MIB

APPEND_BYTES = 16 * 1024


@dataclass
class Row:
    size_mib: float
    mode: str
    origin_mib_per_reader: float
    origin_reads_per_reader: float
    responses_per_reader: float


def measure(size_mib: float, readers: int, from_start_bytes: int | None, mode: str) -> Row:
    with (
        rig(max_read_from_start_bytes=from_start_bytes) as running,
        httpx.Client(timeout=60) as client,
    ):
        counter = running.counter
        url = running.stream_url(running.origin_url, "s")
        cdn_stream = running.stream_url(running.cdn_url, "s")
        client.headers["Content-Type"] = "application/octet-stream"
        client.put(url).raise_for_status()
        written = b""
        while len(written) < size_mib * MIB:
            part = bytes([len(written) // APPEND_BYTES % 251]) * APPEND_BYTES
            client.post(url, content=part).raise_for_status()
            written += part
        counter.reset()
        responses = 0
        for reader in range(readers):
            data, taken = read_from_start(client, cdn_stream)
            if data != written:
                raise SystemExit(f"reader {reader} read {len(data)} bytes, not {len(written)}")
            responses += taken
            part = bytes([reader % 251]) * 100
            client.post(url, content=part).raise_for_status()  # the stream goes on
            written += part
    return Row(
        size_mib,
        mode,
        counter.read_bytes / readers / MIB,
        counter.methods["GET"] / readers,
        responses / readers,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-mib", type=float, nargs="+", default=[0.7, 2.5, 5.5, 12.3, 14.7])
    parser.add_argument("--readers", type=int, default=10)
    args = parser.parse_args()
    print(f"{args.readers} readers in turn, each from the start to up to date through nginx")
    columns = (
        "stream",
        "reads from the start",
        "origin MiB per reader",
        "origin reads per reader",
        "responses per reader",
    )
    print_table(columns, "><>>>", rows(args.sizes_mib, args.readers), flush=True)


def rows(sizes_mib: list[float], readers: int) -> Iterator[list[str]]:
    """A row per stream size and way of reading, as soon as it is measured."""
    for size in sizes_mib:
        for from_start, mode in ((MIB, "capped at 1 MiB (before)"), (None, "whole (now)")):
            row = measure(size, readers, from_start, mode)
            yield [
                f"{size:g} MiB",
                row.mode,
                f"{row.origin_mib_per_reader:.2f}",
                f"{row.origin_reads_per_reader:.1f}",
                f"{row.responses_per_reader:.1f}",
            ]


if __name__ == "__main__":
    main()
