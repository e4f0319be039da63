"""`dsaws serve` with its console for the browser tests: without access control (as a developer
runs it) or with it (as a deployment is), each in a child process on a free port with its data
in memory."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from auth_support import KEY_SET_TEXT, bearer, token
from support import ServerProcess

BASE_PATH = "/v1/stream"
CONSOLE_PATH = "/console"
PUBLIC_PREFIX = "public/"
# The listing is what the console's list of streams reads; `dsaws serve` turns it on by itself
# only on loopback without access control.
_CONSOLE_ENV = {"DS_LISTING": "true"}
_AUTH_ENV = {"DS_AUTH_SECRET": KEY_SET_TEXT, "DS_PUBLIC_READ_PREFIXES": PUBLIC_PREFIX}


@dataclass(frozen=True)
class ConsoleServer:
    process: ServerProcess

    @property
    def base_url(self) -> str:
        return self.process.base_url

    @property
    def console_url(self) -> str:
        return f"{self.base_url}{CONSOLE_PATH}/"

    @property
    def api_url(self) -> str:
        """The console's own JSON API (`{console_url}api/session`, ...)."""
        return f"{self.console_url}api"

    def stream_url(self, path: str) -> str:
        return f"{self.base_url}{BASE_PATH}/{path.lstrip('/')}"

    def log(self) -> str:
        """The end of what the server has printed."""
        return self.process.log()


@dataclass(frozen=True)
class AuthConsoleServer(ConsoleServer):
    """`dsaws serve --auth`: every request but a read under `public/` needs a token."""

    public_prefix: str = PUBLIC_PREFIX

    def token(self, scope: str, *, lifetime: float = 600) -> str:
        """A token the server accepts, minted now with grants `scope` ("read:*",
        "read,append:chat/ operate:*")."""
        return token(scope, lifetime=lifetime)

    def headers(self, scope: str) -> dict[str, str]:
        """`Authorization: Bearer <a token for scope>`, for requests from the test itself."""
        return bearer(self.token(scope))


@contextlib.contextmanager
def running_console(*args: str, env: dict[str, str] | None = None) -> Iterator[ConsoleServer]:
    """`dsaws serve --in-memory <args>` with the console and the listing on (`env` may turn
    them off: {"DS_LISTING": "false"})."""
    with ServerProcess("--in-memory", *args, env={**_CONSOLE_ENV, **(env or {})}) as process:
        yield ConsoleServer(process)


@contextlib.contextmanager
def running_auth_console(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[AuthConsoleServer]:
    """The same with access control on (`--auth`, the test keys of auth_support)."""
    merged = {**_CONSOLE_ENV, **_AUTH_ENV, **(env or {})}
    with ServerProcess("--in-memory", "--auth", *args, env=merged) as process:
        yield AuthConsoleServer(process)
