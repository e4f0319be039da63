"""What a batch read of streams covers, decided on the driver from the options: pure, apart
from Spark and from I/O (the tails and content types are looked up by the caller)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from core.protocol.offsets import format_offset

BEGINNING = "-1"
FIRST = format_offset(0)  # this server's first offset: nothing lies before it
EARLIEST = "earliest"
LATEST = "latest"


class OptionError(ValueError):
    """An option the source cannot use; the message says which and why."""


@dataclass(frozen=True)
class ReadOptions:
    url: str  # the base URL the stream paths are under, e.g. http://host/v1/stream
    streams: tuple[str, ...]
    starting: Mapping[str, str]  # stream -> offset; absent streams start at the beginning
    ending: Mapping[str, str] | None  # stream -> offset; None: each stream's tail when planned

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        url = (options.get("url") or "").rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise OptionError("option 'url' is required: the streams' base URL (http or https)")
        names = [options.get("stream") or "", *(options.get("streams") or "").split(",")]
        streams = tuple(dict.fromkeys(name.strip().strip("/") for name in names if name.strip()))
        if not streams:
            raise OptionError("option 'stream' or 'streams' (comma-separated) names what to read")
        starting = _offsets(options.get("startingoffsets"), EARLIEST, streams, "startingOffsets")
        ending = _offsets(options.get("endingoffsets"), LATEST, streams, "endingOffsets")
        return cls(url, streams, starting or {}, ending)

    def stream_url(self, stream: str) -> str:
        return f"{self.url}/{stream}"


def _offsets(
    value: str | None, keyword: str, streams: tuple[str, ...], name: str
) -> dict[str, str] | None:
    """`keyword` (or nothing) means the default for every stream (None); otherwise a JSON
    object of stream -> offset for streams being read."""
    if value is None or value.strip() == keyword:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
        raise OptionError(f"{name} must be {keyword!r} or a JSON object of stream -> offset")
    unknown = sorted(set(parsed) - set(streams))
    if unknown:
        raise OptionError(f"{name} names streams that are not read: {', '.join(unknown)}")
    return dict(parsed)


@dataclass(frozen=True)
class StreamSlice:
    """One stream's range to read: from `start` up to `end`."""

    stream: str
    url: str
    start: str
    end: str
    content_type: str


def plan_slices(
    options: ReadOptions, tails: Mapping[str, str], content_types: Mapping[str, str]
) -> list[StreamSlice]:
    """The non-empty range of each stream, given the tails found when planning."""
    slices = []
    for stream in options.streams:
        start = options.starting.get(stream, BEGINNING)
        end = tails[stream] if options.ending is None else options.ending.get(stream, tails[stream])
        if end != start and not (start == BEGINNING and end == FIRST):
            url = options.stream_url(stream)
            slices.append(StreamSlice(stream, url, start, end, content_types[stream]))
    return slices
