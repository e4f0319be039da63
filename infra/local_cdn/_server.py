"""Running the local CDN: nginx on loopback in front of the server, as the invoking user, with
its configuration, cache and temporary files in a private directory removed when it stops."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from durable_streams_aws.core.cdn import DEFAULT_POLICY, CdnPolicy

from ._conf import DEFAULT_MAX_APPEND_BYTES, NginxSite, render_nginx_conf

_WORKDIR_PREFIX = "dsaws-cdn-"
# Where `dsaws install-nginx` unpacks Debian's nginx package when the system has none.
NGINX_HOME = Path.home() / ".cache" / "durable-streams-aws" / "nginx"
INSTALL_HINT = (
    "nginx is needed for --cdn-port: run `dsaws install-nginx` (it unpacks Debian's nginx "
    f"package into {NGINX_HOME}, starting no service), or `apt-get install nginx-light`"
)


class NginxNotFound(RuntimeError):
    def __init__(self) -> None:
        super().__init__(INSTALL_HINT)


def find_nginx() -> str | None:
    """nginx from $DSAWS_NGINX, the unpacked package, the PATH, or /usr/sbin."""
    candidates = [
        os.environ.get("DSAWS_NGINX"),
        str(NGINX_HOME / "usr" / "sbin" / "nginx"),
        shutil.which("nginx"),
        "/usr/sbin/nginx",
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class LocalCdn:
    def __init__(
        self,
        listen_port: int,
        origin_port: int,
        *,
        host: str = "127.0.0.1",
        origin_host: str = "127.0.0.1",
        policy: CdnPolicy = DEFAULT_POLICY,
        origin_secret: str | None = None,
        max_append_bytes: int = DEFAULT_MAX_APPEND_BYTES,
        header_timeout: int = 10,
        body_timeout: int = 30,
    ) -> None:
        self.listen_port = listen_port
        self.origin_port = origin_port
        self.host = host
        self.origin_host = origin_host
        self.policy = policy
        # Added to every request to the origin, as the CloudFront origin's custom header.
        self.origin_secret = origin_secret
        self.limits = (max_append_bytes, header_timeout, body_timeout)
        self.workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.listen_port}"

    @property
    def access_log(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "access.log"

    def start(self, timeout: float = 10.0) -> LocalCdn:
        binary = find_nginx()
        if binary is None:
            raise NginxNotFound()
        _remove_abandoned_workdirs()
        self.workdir = Path(tempfile.mkdtemp(prefix=_WORKDIR_PREFIX))
        site = NginxSite(
            self.host,
            self.listen_port,
            self.origin_host,
            self.origin_port,
            self.workdir,
            _run_as(),
            self.origin_secret,
            *self.limits,
        )
        conf = self.workdir / "nginx.conf"
        conf.write_text(render_nginx_conf(self.policy, site))
        command = [*_stop_with_parent(), binary, "-p", str(self.workdir), "-c", str(conf)]
        command += ["-e", str(self.workdir / "error.log"), "-g", "daemon off;"]
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self._wait_until_listening(timeout)
        return self

    def _wait_until_listening(self, timeout: float) -> None:
        """Until nginx has written its pid file (it does so only once its port is bound, so a
        port that another program holds is never mistaken for ours) and answers on the port."""
        assert self._process is not None and self.workdir is not None
        pid_file = self.workdir / "nginx.pid"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                message = self._process.stderr.read().decode() if self._process.stderr else ""
                log = self.workdir / "error.log" if self.workdir else None
                if log is not None and log.exists():
                    message += log.read_text()
                self.stop()
                raise RuntimeError(f"nginx did not start: {message.strip()}")
            with socket.socket() as probe:
                probe.settimeout(0.2)
                bound = pid_file.exists()
                if bound and probe.connect_ex((self.host, self.listen_port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not listen on {self.host}:{self.listen_port}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()  # SIGTERM: nginx's fast shutdown
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None and process.stderr is not None:
            process.stderr.close()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> LocalCdn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_with_parent() -> list[str]:
    """A prefix that makes nginx get SIGTERM when the server that started it dies, even by
    SIGKILL (Linux's parent-death signal, set by util-linux's setpriv before it runs nginx)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def _remove_abandoned_workdirs() -> None:
    """Directories left by a local CDN whose server was killed (nothing could remove them):
    ours, older than a minute, and with no nginx running from them."""
    for workdir in Path(tempfile.gettempdir()).glob(_WORKDIR_PREFIX + "*"):
        try:
            info = workdir.stat()
            if info.st_uid != os.geteuid() or time.time() - info.st_mtime < 60:
                continue
            pid_file = workdir / "nginx.pid"
            if pid_file.exists() and _running(int(pid_file.read_text().strip() or 0)):
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(workdir, ignore_errors=True)


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_as() -> tuple[str, str] | None:
    """Started as root, nginx would hand its workers to `nobody`; keep them as the invoker."""
    if os.geteuid() != 0:
        return None
    return pwd.getpwuid(os.geteuid()).pw_name, grp.getgrgid(os.getegid()).gr_name
