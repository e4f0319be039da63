"""What a read of streams covers, decided on the driver from the options: pure, apart from
Spark and from I/O (listings, tails and content types are looked up by the caller)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import quote

from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.offsets import format_offset, parse_position

BEGINNING = "-1"
FIRST = format_offset(0)  # this server's first offset: nothing lies before it
EARLIEST = "earliest"
LATEST = "latest"


class OptionError(ValueError):
    """An option the source cannot use; the message says which and why."""


class DataLoss(RuntimeError):
    """A stream being read was deleted, or re-created shorter than where the read stands: what
    the read had not reached yet is gone (`failOnDataLoss=false` reads on without it)."""


@dataclass(frozen=True)
class Origin:
    """Where streams are read from: a server's base URL (the public API), or the DynamoDB table
    and S3 bucket that store them (a bulk job's direct path)."""

    url: str | None = None
    table: str | None = None
    bucket: str | None = None
    endpoint: str | None = None  # an emulator or other AWS-compatible endpoint
    region: str | None = None
    # A bearer token for a server with access control (HTTP only); kept out of reprs and logs.
    token: str | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Origin:
        url = (options.get("url") or "").rstrip("/")
        table, bucket = options.get("table"), options.get("bucket")
        if url and (table or bucket):
            raise OptionError("give either 'url' (read over HTTP) or 'table' and 'bucket'")
        if table or bucket:
            if not (table and bucket):
                raise OptionError("reading the store directly needs both 'table' and 'bucket'")
            return cls(None, table, bucket, options.get("endpoint"), options.get("region"))
        if not url.startswith(("http://", "https://")):
            raise OptionError(
                "option 'url' is required: the streams' base URL (http or https), "
                "or 'table' and 'bucket' to read the store directly"
            )
        return cls(url, token=options.get("token") or None)

    @property
    def direct(self) -> bool:
        return self.table is not None

    def stream_url(self, stream: str) -> str:
        return f"{self.url}/{quote(stream, safe='/')}"


@dataclass(frozen=True)
class ReadOptions:
    origin: Origin
    streams: tuple[str, ...]  # named ones, and (once resolved) those under `prefix`
    prefix: str | None
    starting: Mapping[str, str]  # stream -> offset; absent streams start at the beginning
    ending: Mapping[str, str] | None  # stream -> offset; None: each stream's tail when planned
    json_schema: str | None = None  # DDL of the fields of JSON messages, parsed into `value`
    fail_on_data_loss: bool = True
    partition_bytes: int | None = None  # split a stream's range (direct reads)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        origin = Origin.parse(options)
        names = [options.get("stream") or "", *(options.get("streams") or "").split(",")]
        streams = tuple(dict.fromkeys(name.strip().strip("/") for name in names if name.strip()))
        prefix = options.get("prefix")
        if not streams and prefix is None:
            raise OptionError(
                "option 'stream', 'streams' (comma-separated) or 'prefix' names what to read"
            )
        starting = _offsets(options.get("startingoffsets"), EARLIEST, "startingOffsets")
        ending = _offsets(options.get("endingoffsets"), LATEST, "endingOffsets")
        for name, given in (("startingOffsets", starting), ("endingOffsets", ending)):
            unknown = sorted(set(given or ()) - set(streams)) if prefix is None else []
            if unknown:
                raise OptionError(f"{name} names streams that are not read: {', '.join(unknown)}")
        json_schema = (options.get("jsonschema") or "").strip() or None
        return cls(
            origin,
            streams,
            prefix,
            starting or {},
            ending,
            json_schema,
            _flag(options, "failondataloss", default=True),
            positive_option(options, "bytesperpartition"),
        )

    def with_listed(self, listed: Sequence[str]) -> ReadOptions:
        """These options with the streams found under the prefix added."""
        return replace(self, streams=tuple(sorted({*self.streams, *listed})))


def _offsets(value: str | None, keyword: str, name: str) -> dict[str, str] | None:
    """`keyword` (or nothing) means the default for every stream (None); otherwise a JSON
    object of stream -> offset ("-1" or an offset this server gave out)."""
    if value is None or value.strip() == keyword:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(
        isinstance(v, str) and is_offset(v) for v in parsed.values()
    ):
        raise OptionError(
            f"{name} must be {keyword!r} or a JSON object of stream -> offset "
            f'("-1" or an offset the server gave out)'
        )
    return dict(parsed)


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    if value.strip().lower() not in {"true", "false"}:
        raise OptionError(f"{name} must be true or false, not {value!r}")
    return value.strip().lower() == "true"


def positive_option(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name)
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise OptionError(f"{name} must be a positive whole number, not {value!r}")
    return int(value)


def is_offset(token: str) -> bool:
    """Whether `token` is "-1" or an offset this server gives out."""
    try:
        position(token)
    except ValueError:
        return False
    return True


def position(token: str) -> int:
    """The byte position of "-1" or of an offset token this server gave out (the options are
    checked when parsed, and tails come from the server, so anything else is a bug)."""
    if token == BEGINNING:
        return 0
    try:
        return parse_position(token)
    except ProtocolError:
        raise ValueError(f"not an offset of this server: {token!r}") from None


@dataclass(frozen=True)
class StreamState:
    """What planning needs to know of a stream: its tail and content type."""

    tail: str
    content_type: str


@dataclass(frozen=True)
class StreamSlice:
    """One stream's range to read: from `start` up to `end`."""

    stream: str
    start: str
    end: str
    content_type: str


def plan_slices(
    options: ReadOptions, states: Mapping[str, StreamState | None], listed: Sequence[str] = ()
) -> list[StreamSlice]:
    """The non-empty range of each stream, given what was found when planning (None: the
    stream is not there). A stream that was only listed and is gone since is skipped; a named
    one that is gone, or one shorter than its start, is data loss."""
    slices = []
    for stream in options.streams:
        state = states.get(stream)
        start = options.starting.get(stream, BEGINNING)
        if state is None:
            if stream not in listed:
                lost(options, f"stream {stream!r} does not exist (deleted?)")
            continue
        if position(start) > position(state.tail):
            lost(options, f"stream {stream!r} ends before {start} (deleted and re-created?)")
            start = BEGINNING
        end = state.tail if options.ending is None else options.ending.get(stream, state.tail)
        if position(end) > position(state.tail):
            raise OptionError(f"endingOffsets: stream {stream!r} ends before {end}")
        if position(end) < position(start):
            raise OptionError(f"endingOffsets: stream {stream!r} ends before it starts")
        if position(end) != position(start):
            slices.append(StreamSlice(stream, start, end, state.content_type))
    return slices


def lost(options: ReadOptions, what: str) -> None:
    """Data loss: an error, unless the options say to read on without the lost data."""
    if options.fail_on_data_loss:
        raise DataLoss(f"{what}; set failOnDataLoss=false to read on without it")
