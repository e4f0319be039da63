"""The `dsaws` stream commands: create, append, read, tail, head, close, delete, fork.

The whole project's `dsaws` (`core.cli`) adds them to its server commands; the client's own
distribution installs a `dsaws` of these commands alone (`main`).

Streams are named relative to a base URL (`--url`, or `DSAWS_URL`, default the local server).
Data goes to standard output exactly as stored (JSON streams: one message per line, or
indented with `--pretty`); where to resume (`next offset: ...`) goes to standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from ._errors import (
    AccessDenied,
    BadRequest,
    DurableStreamError,
    OffsetGone,
    OutcomeUnknown,
    StreamConflict,
    StreamGone,
    StreamNotFound,
    Unavailable,
)
from ._offset import Offset
from ._producer import ProducerError, SyncIdempotentProducer
from ._sync import DurableStream
from ._wire import Batch, OnGone, is_json, join_bodies

URL_VARIABLE = "DSAWS_URL"
TOKEN_VARIABLE = "DSAWS_TOKEN"
DEFAULT_URL = "http://127.0.0.1:4437/v1/stream"
# Bulk input is sent in appends of at most this many bytes.
BATCH_BYTES = 256 * 1024

# Exit statuses, one per kind of failure (2 is argparse's own for usage errors).
EXIT_ERROR = 1
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_BAD_REQUEST = 5
EXIT_UNAVAILABLE = 6
EXIT_OUTCOME_UNKNOWN = 7
EXIT_ACCESS_DENIED = 8
EXIT_OFFSET_GONE = 9
_EXITS: list[tuple[type[DurableStreamError], int]] = [
    (OutcomeUnknown, EXIT_OUTCOME_UNKNOWN),
    (ProducerError, EXIT_UNAVAILABLE),
    (OffsetGone, EXIT_OFFSET_GONE),
    (StreamNotFound, EXIT_NOT_FOUND),
    (StreamGone, EXIT_NOT_FOUND),
    (StreamConflict, EXIT_CONFLICT),
    (AccessDenied, EXIT_ACCESS_DENIED),
    (BadRequest, EXIT_BAD_REQUEST),
    (Unavailable, EXIT_UNAVAILABLE),
]


def add_commands(commands: Any) -> None:
    """Add the stream commands to the `dsaws` parser's subcommands."""

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text)
        parser.add_argument("stream", help="the stream's path under the base URL")
        parser.add_argument("--url", help=f"base URL of the streams (default: ${URL_VARIABLE})")
        parser.add_argument(
            "--token", help=f"bearer token to send (default: ${TOKEN_VARIABLE}; none if unset)"
        )
        parser.set_defaults(handler=run)
        return parser

    create = command("create", "create a stream")
    create.add_argument("--content-type", default="application/octet-stream")
    create.add_argument("--ttl", type=int, help="seconds of inactivity before it expires")
    create.add_argument("--expires-at", help="RFC 3339 time at which it expires")
    create.add_argument("--closed", action="store_true", help="create it closed")
    create.add_argument(
        "--retention",
        metavar="POLICY",
        help="what the stream keeps: 'max-age=SECONDS', 'max-bytes=N' (both: separated by ';'), "
        "or 'compact' (JSON streams: the latest value of each key)",
    )

    append = command("append", "append the arguments, or standard input")
    append.add_argument("data", nargs="*", help="what to append (default: standard input)")
    append.add_argument("--content-type", help="(default: the stream's)")
    append.add_argument("--close", action="store_true", help="close the stream with the append")
    append.add_argument(
        "--producer",
        metavar="ID",
        help="send as an idempotent producer (exactly once, batched and pipelined: for bulk input)",
    )
    append.add_argument(
        "--epoch",
        type=int,
        default=None,
        help="the producer's epoch (default: the time in milliseconds, so every run is a new "
        "session that fences the ones before it)",
    )

    for name, help_text in (("read", "print the stream up to its tail"), ("tail", "follow it")):
        reader = command(name, help_text)
        reader.add_argument("--from", dest="start", default="-1", help="offset to start at")
        reader.add_argument("--pretty", action="store_true", help="indent JSON messages")
        reader.add_argument(
            "--from-earliest",
            action="store_true",
            help="where the stream's retention has dropped the data at the offset, go on from "
            "the earliest offset still kept (saying so on standard error) instead of failing "
            f"with exit status {EXIT_OFFSET_GONE}",
        )
    reader.add_argument(
        "--live",
        choices=["auto", "sse", "long-poll"],
        default="auto",
        help="how to follow once caught up (default: auto, SSE where it keeps every byte)",
    )

    command("head", "print the stream's metadata as JSON")
    close = command("close", "close the stream")
    close.add_argument("final", nargs="?", help="a last message, written with the close")
    command("delete", "delete the stream")
    fork = command("fork", "create the stream as a fork of another")
    fork.add_argument("--from", dest="source", required=True, help="the source stream's path")
    fork.add_argument("--at", dest="offset", help="fork offset (default: the source's tail)")


def main(argv: Sequence[str] | None = None) -> int:
    """`dsaws` as the client's distribution installs it: the stream commands, nothing else."""
    parser = argparse.ArgumentParser(prog="dsaws", description="Durable Streams stream commands")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    base = (args.url or os.environ.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")
    try:
        token = args.token or os.environ.get(TOKEN_VARIABLE) or None
        with DurableStream(f"{base}/{args.stream}", token=token) as stream:
            return _COMMANDS[args.command](stream, args, base)
    except OffsetGone as exc:
        print(f"dsaws {args.command}: {_gone_line(exc)}", file=sys.stderr)
        return EXIT_OFFSET_GONE
    except DurableStreamError as exc:
        print(f"dsaws {args.command}: {exc}", file=sys.stderr)
        return next((code for kind, code in _EXITS if isinstance(exc, kind)), EXIT_ERROR)
    except (ValueError, UnicodeDecodeError) as exc:
        print(f"dsaws {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_REQUEST


def _gone_line(exc: OffsetGone) -> str:
    """One line for a read whose offset the stream's retention dropped: where to start again."""
    asked = f"offset {exc.offset}" if exc.offset is not None else "the offset"
    earliest = exc.earliest_offset
    where = (
        f"the earliest offset still kept is {earliest}; run again with --from {earliest} "
        "or with --from-earliest"
        if earliest is not None
        else "run again with --from -1 or with --from-earliest"
    )
    return f"{asked} is gone (dropped under the stream's retention policy): {where}"


def _create(stream: DurableStream, args: argparse.Namespace, _: str) -> int:
    info = stream.create(
        args.content_type,
        ttl=args.ttl,
        expires_at=args.expires_at,
        closed=args.closed,
        retention=args.retention,
    )
    print(f"next offset: {info.next_offset}", file=sys.stderr)
    return 0


def _append(stream: DurableStream, args: argparse.Namespace, _: str) -> int:
    content_type = args.content_type or stream.head().content_type
    if args.producer:
        return _produce(stream, args, content_type)
    pieces = [a.encode() for a in args.data] if args.data else _stdin_lines()
    last: Offset | None = None
    for body in _batches(pieces, content_type):
        last = stream.append(body, content_type=content_type)
    if args.close:
        last = stream.close()
    if last is not None:
        print(f"next offset: {last}", file=sys.stderr)
    return 0


def _produce(stream: DurableStream, args: argparse.Namespace, content_type: str) -> int:
    """Bulk input through an idempotent producer, with a progress line on standard error."""
    pieces = [a.encode() for a in args.data] if args.data else _stdin_lines()
    json_stream = is_json(content_type)
    epoch = args.epoch if args.epoch is not None else int(time.time() * 1000)
    producer = SyncIdempotentProducer(
        stream.url, args.producer, epoch=epoch, content_type=content_type
    )
    progress = _Progress()
    try:
        for piece, value in _messages(pieces, json_stream):
            producer.append(value)
            progress.add(len(piece))
        last = producer.close() if args.close else producer.flush()
    except BaseException:
        producer.detach()
        raise
    if not args.close:
        producer.detach()
    progress.done()
    if last is not None:
        print(f"next offset: {last}", file=sys.stderr)
    return 0


class _Progress:
    """`appended N messages (B bytes)` on standard error, at most once a second."""

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.shown_at = time.monotonic()

    def add(self, size: int) -> None:
        self.messages += 1
        self.bytes += size
        if time.monotonic() - self.shown_at >= 1.0:
            self.shown_at = time.monotonic()
            print(self._line(), end="", file=sys.stderr)

    def done(self) -> None:
        print(self._line(), file=sys.stderr)

    def _line(self) -> str:
        return f"\rappended {self.messages} messages ({self.bytes} bytes)"


def _stdin_lines() -> Iterator[bytes]:
    yield from sys.stdin.buffer


def _batches(pieces: Iterable[bytes], content_type: str) -> Iterator[bytes]:
    """Appends of at most BATCH_BYTES: JSON input is one message per line (a JSON array per
    append); anything else is sent as it comes."""
    json_stream = is_json(content_type)
    buffered: list[bytes] = []
    size = 0
    for piece, _ in _messages(pieces, json_stream):
        if buffered and size + len(piece) > BATCH_BYTES:
            yield join_bodies(buffered, json_stream)
            buffered, size = [], 0
        buffered.append(piece)
        size += len(piece) + 1
    if buffered:
        yield join_bodies(buffered, json_stream)


def _messages(pieces: Iterable[bytes], json_stream: bool) -> Iterator[tuple[bytes, Any]]:
    """Each piece of input with the value to append for it. JSON input is one value per line,
    each checked as it is read (blank lines skipped); anything else goes as it comes."""
    for number, piece in enumerate(pieces, 1):
        if not json_stream:
            yield piece, piece
            continue
        text = piece.strip()
        if not text:
            continue
        try:
            yield text, json.loads(text)
        except ValueError as exc:
            raise ValueError(f"line {number} is not a JSON value ({exc})") from None


def _read(stream: DurableStream, args: argparse.Namespace, _: str) -> int:
    live = args.live if args.command == "tail" else None
    on_gone: OnGone = "earliest" if args.from_earliest else "raise"
    last: Batch | None = None
    try:
        for batch in stream.read(Offset(args.start), live=live, on_gone=on_gone):
            if batch.skipped_from is not None:
                print(
                    f"dsaws {args.command}: offset {batch.skipped_from} was gone (dropped under "
                    f"the stream's retention policy): going on from {batch.offset}",
                    file=sys.stderr,
                )
            _print_batch(batch, args.pretty, sys.stdout)
            last = batch
    except KeyboardInterrupt:
        pass
    if last is not None:
        state = " (closed: the stream is complete)" if last.closed else ""
        print(f"next offset: {last.next_offset}{state}", file=sys.stderr)
    return 0


def _print_batch(batch: Batch, pretty: bool, out: TextIO) -> None:
    if batch.messages is None:
        out.buffer.write(batch.data)
    else:
        for message in batch.messages:
            out.write(json.dumps(message, indent=2 if pretty else None, ensure_ascii=False) + "\n")
    out.flush()


def _head(stream: DurableStream, args: argparse.Namespace, _: str) -> int:
    info = stream.head()
    fields = {
        "content_type": info.content_type,
        "next_offset": str(info.next_offset),
        "closed": info.closed,
        "ttl": info.ttl,
        "expires_at": info.expires_at,
        "retention": info.retention,
        "earliest_offset": str(info.earliest_offset) if info.earliest_offset else None,
    }
    print(json.dumps(fields))
    return 0


def _close(stream: DurableStream, args: argparse.Namespace, _: str) -> int:
    final: str | list[Any] | None = args.final
    if final is not None and is_json(stream.head().content_type):
        try:
            final = [json.loads(final)]
        except ValueError as exc:
            raise ValueError(f"the final message is not a JSON value ({exc})") from None
    print(f"next offset: {stream.close(final)} (closed)", file=sys.stderr)
    return 0


def _delete(stream: DurableStream, args: argparse.Namespace, _: str) -> int:
    stream.delete()
    return 0


def _fork(stream: DurableStream, args: argparse.Namespace, base: str) -> int:
    source_path = "/" + f"{base}/{args.source}".split("://", 1)[-1].split("/", 1)[-1]
    at = Offset(args.offset) if args.offset else None
    info = stream.fork(source_path, offset=at)
    print(f"next offset: {info.next_offset}", file=sys.stderr)
    return 0


_COMMANDS = {
    "create": _create,
    "append": _append,
    "read": _read,
    "tail": _read,
    "head": _head,
    "close": _close,
    "delete": _delete,
    "fork": _fork,
}


if __name__ == "__main__":
    sys.exit(main())
