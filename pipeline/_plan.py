"""What a read of streams covers, decided on the driver from the options: pure, apart from
Spark and from I/O (listings, tails and content types are looked up by the caller)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import quote

from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.offsets import format_offset, parse_offset, parse_position

BEGINNING = "-1"
FIRST = format_offset(0)  # this server's first offset: nothing lies before it
EARLIEST = "earliest"
LATEST = "latest"

log = logging.getLogger("durable_streams_aws.pipeline")


class OptionError(ValueError):
    """An option the source cannot use; the message says which and why."""


class DataLoss(RuntimeError):
    """A stream being read was deleted, or re-created shorter than where the read stands, or
    its retention policy dropped data the read had not reached yet: that data is gone
    (`failOnDataLoss=false` reads on without it)."""


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
    min_partitions: int | None = None  # how many partitions to pack ranges into (about)

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
        snapshots = sorted(s for s, token in (ending or {}).items() if is_snapshot(token))
        if snapshots:
            raise OptionError(
                f"endingOffsets: a snapshot's offset (..._s) names no position to end at "
                f"({', '.join(snapshots)}): end at a plain offset"
            )
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
            positive_option(options, "minpartitions"),
        )

    def with_listed(self, listed: Sequence[str]) -> ReadOptions:
        """These options with the streams found under the prefix added."""
        return replace(self, streams=tuple(sorted({*self.streams, *listed})))


def _offsets(value: str | None, keyword: str, name: str) -> dict[str, str] | None:
    """`keyword` (or nothing) means the default for every stream (None); otherwise a JSON
    object of stream -> offset ("-1" or an offset this server gave out, a compacted stream's
    snapshot token included)."""
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
    """Whether `token` is "-1" or an offset this server gives out (a snapshot's included)."""
    try:
        rank(token)
    except ValueError:
        return False
    return True


def is_snapshot(token: str) -> bool:
    """Whether `token` is a compacted stream's snapshot token (`..._s`): it names no byte
    position, and a read at it returns the snapshot, then the history after it."""
    return is_offset(token) and token != BEGINNING and parse_offset(token).snapshot


def position(token: str) -> int:
    """The byte position of "-1" or of an offset token this server gave out (the options are
    checked when parsed, and tails come from the server, so anything else is a bug)."""
    if token == BEGINNING:
        return 0
    try:
        return parse_position(token)
    except ProtocolError:
        raise ValueError(f"not an offset of this server: {token!r}") from None


def rank(token: str) -> tuple[int, int]:
    """Where `token` lies, for ranges: its byte position, a snapshot's token just before the
    position its history goes on at (after every position below). "-1" is position 0; an
    offset inside an append (`_i`) ranks with its position, as ranges always compared them."""
    if token == BEGINNING:
        return (0, 1)
    try:
        parsed = parse_offset(token)
    except ProtocolError:
        raise ValueError(f"not an offset of this server: {token!r}") from None
    return (parsed.at, 0) if parsed.snapshot else (parsed.at, 1)


@dataclass(frozen=True)
class StreamState:
    """What planning needs to know of a stream: its tail and content type, and the earliest
    offset a read may start at when its retention policy has dropped older data (None when
    nothing was dropped)."""

    tail: str
    content_type: str
    earliest: str | None = None


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
    one that is gone, or one shorter than its start, is data loss, and so is a start its
    retention policy dropped (the beginning is then the earliest offset kept)."""
    slices = []
    for stream in options.streams:
        state = states.get(stream)
        start = options.starting.get(stream, BEGINNING)
        if state is None:
            if stream not in listed:
                lost(options, f"stream {stream!r} does not exist (deleted?)")
            continue
        if rank(start) > rank(state.tail):
            lost(options, f"stream {stream!r} ends before {start} (deleted and re-created?)")
            start = BEGINNING
        end = state.tail if options.ending is None else options.ending.get(stream, state.tail)
        if rank(end) > rank(state.tail):
            raise OptionError(f"endingOffsets: stream {stream!r} ends before {end}")
        if state.earliest is not None:  # retention dropped data before it
            asked = FIRST if start == BEGINNING else start
            if start == BEGINNING and not before(end, retained_from(state.earliest)):
                # The beginning kept (a compacted stream's snapshot first): nothing is lost.
                start = state.earliest
            elif before(asked, state.earliest):
                skipped = after_gone(stream, asked, state.earliest, end, options.fail_on_data_loss)
                log.warning("%s", skipped)
                if skipped.resume is None:
                    continue
                start = skipped.resume
        if rank(end) < rank(start):
            raise OptionError(f"endingOffsets: stream {stream!r} ends before it starts")
        if rank(end) != rank(start):
            slices.append(StreamSlice(stream, start, end, state.content_type))
    return slices


# What opening a range costs, counted in the bytes that could be read meanwhile, and how much a
# packed partition holds at most: Spark's own file source's defaults (`openCostInBytes`,
# `maxPartitionBytes`). A Spark task of a Python source costs about 50 ms of CPU before it
# reads anything, as much as reading a few MB through it.
OPEN_COST_BYTES = 4 * 1024 * 1024
MAX_PARTITION_BYTES = 128 * 1024 * 1024


def pack_slices(
    slices: Sequence[StreamSlice], min_partitions: int, bytes_per_partition: int | None = None
) -> list[tuple[StreamSlice, ...]]:
    """The slices grouped into partitions, in their order, so that small streams are read
    together rather than each in a Spark task of its own. As Spark's file source counts
    files, each slice costs its bytes plus `OPEN_COST_BYTES`, and the whole cost is shared
    among `min_partitions`: the slices are laid end to end, and each goes to the share its
    middle falls in (so slices of about equal cost make `min_partitions` partitions, however
    their sizes differ by a few bytes; fewer where a few slices hold most of the cost). No
    partition holds more than `MAX_PARTITION_BYTES` unless one slice alone does (packing
    never splits one); where a share would be more, each partition fills up to that. With
    `bytes_per_partition` (the option), slices cost their bytes alone, and partitions fill up
    to that many. A slice that starts with a compacted stream's snapshot is read alone."""
    open_cost = OPEN_COST_BYTES if bytes_per_partition is None else 0
    most = bytes_per_partition or MAX_PARTITION_BYTES
    # A range from a snapshot's token reads the snapshot first, whose size is not known
    # before it is read: counted as a whole partition's worth, it is read alone.
    costs = [most if _from_snapshot(p) else span_bytes(p) + open_cost for p in slices]
    share = bytes_per_partition
    if share is None:
        share = min(most, max(OPEN_COST_BYTES, -(-sum(costs) // max(min_partitions, 1))))
    by_share = share < most  # otherwise each partition simply fills up to `most`
    packed: list[list[StreamSlice]] = []
    laid = filled = 0
    last_share = -1
    for piece, cost in zip(slices, costs, strict=True):
        middle_share = (2 * laid + cost) // (2 * share)
        if not packed or (by_share and middle_share != last_share) or filled + cost > most:
            packed.append([])
            filled = 0
        packed[-1].append(piece)
        laid, filled, last_share = laid + cost, filled + cost, middle_share
    return [tuple(partition) for partition in packed]


def span_bytes(piece: StreamSlice) -> int:
    """About how many bytes reading the slice's history returns: its positions' distance (a
    snapshot it starts with is more, of a size not known before it is read)."""
    return max(0, rank(piece.end)[0] - rank(piece.start)[0])


def _from_snapshot(piece: StreamSlice) -> bool:
    return piece.start != BEGINNING and is_snapshot(piece.start)


def lost(options: ReadOptions, what: str) -> None:
    """Data loss: an error, unless the options say to read on without the lost data."""
    if options.fail_on_data_loss:
        raise DataLoss(f"{what}; set failOnDataLoss=false to read on without it")


@dataclass(frozen=True)
class Skipped:
    """What a read of `stream` skips after a 410 Gone said `asked` is no longer kept (dropped
    under the stream's retention policy), `earliest` being the earliest offset kept (None: the
    server did not say). It reads on from `resume`, or (None) has nothing left before its end."""

    stream: str
    asked: str
    earliest: str | None
    resume: str | None

    @property
    def lost(self) -> str:
        """The range lost, named for people."""
        if self.earliest is None:
            return f"stream {self.stream!r}: offsets from {self.asked} on are no longer kept"
        return (
            f"stream {self.stream!r}: offsets from {self.asked} up to {self.earliest} are no "
            f"longer kept (dropped under its retention policy; the earliest offset kept is "
            f"{self.earliest})"
        )

    def __str__(self) -> str:
        if self.resume is None:
            return f"{self.lost}: skipped the rest of the range read"
        return f"{self.lost}: skipped them, reading on from {self.resume}"


def after_gone(
    stream: str, asked: str, earliest: str | None, end: str, fail_on_data_loss: bool
) -> Skipped:
    """The decision after a read of `stream`'s range up to `end` found `asked` no longer kept,
    the earliest offset kept being `earliest` (a 410 Gone with Stream-Earliest-Offset): under
    failOnDataLoss a `DataLoss` naming the stream and the range lost; otherwise what the read
    skips and where it goes on (pure: the caller logs it).

    The range's end stays where it was planned whatever was dropped: a micro-batch planned
    before the loss (its end already in Spark's offset log) reads on from the earliest offset
    kept up to that end, or reads nothing when the loss reaches past it, and the next batch
    starts at that end. A replay reads the same rows, unless retention dropped more meanwhile
    (which is data loss again).

    Where a compacted stream is read on from depends on where the read began: one from the
    beginning (the first offset, or an earlier snapshot's token) reads on from the snapshot
    kept, so that it still has the stream's whole state; one from a plain offset has read
    part of the history already, and reads on where the history after the snapshot goes on."""
    if earliest is not None and not before(asked, earliest):
        # The server says both that `asked` is gone and that it is kept: reading on from the
        # earliest offset would ask for it again, for ever.
        raise DataLoss(f"stream {stream!r}: offset {asked} is gone, yet not before {earliest}")
    if earliest is None:
        resume = BEGINNING
    elif asked in (BEGINNING, FIRST) or is_snapshot(asked):
        resume = earliest
    else:
        resume = retained_from(earliest)
    skipped = Skipped(
        stream, asked, earliest, resume if resume == BEGINNING or before(resume, end) else None
    )
    if fail_on_data_loss:
        raise DataLoss(
            f"{skipped.lost}; set failOnDataLoss=false to read on from the earliest offset kept"
        )
    return skipped


def retained_from(earliest: str) -> str:
    """Where the history goes on, given a stream's earliest offset: that offset, or for a
    compacted stream's snapshot (`..._s`) the plain offset after it (a read that has rows of
    the history already reads on there, without the snapshot)."""
    parsed = parse_offset(earliest)
    return format_offset(parsed.at) if parsed.snapshot else earliest


def before(token: str, other: str) -> bool:
    """Whether offset `token` lies before `other` (either may be a snapshot's token)."""
    return _order(token) < _order(other)


def _order(token: str) -> tuple[int, int, int]:
    if token == BEGINNING:
        return (0, 0, 0)
    try:
        parsed = parse_offset(token)
    except ProtocolError:
        raise ValueError(f"not an offset of this server: {token!r}") from None
    # A snapshot's token sorts just before the position it folds the history up to.
    if parsed.snapshot:
        return (parsed.at, 0, 1)
    return (parsed.at, 1, int(parsed.exact))
