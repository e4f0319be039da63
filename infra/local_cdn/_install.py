"""`dsaws install-nginx`: Debian's nginx package, unpacked for the invoking user.

Unpacking (rather than `apt-get install`) starts no system service, writes nothing outside the
user's cache directory, and needs root only when the package lists have never been fetched.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from ._server import NGINX_HOME, find_nginx

PACKAGE = "nginx"


class InstallFailed(RuntimeError):
    pass


def install_nginx() -> str:
    """The path of a usable nginx, unpacking Debian's package first when there is none."""
    found = find_nginx()
    if found is not None:
        return found
    unpack_nginx_package(NGINX_HOME)
    found = find_nginx()
    if found is None:
        raise InstallFailed(f"the {PACKAGE} package did not contain usr/sbin/nginx")
    return found


def unpack_nginx_package(target: Path) -> Path:
    """Download Debian's nginx package and unpack it into `target` (replacing what is there);
    returns the nginx binary's path."""
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise InstallFailed(f"{tool} is not available: install nginx with your package manager")
    with tempfile.TemporaryDirectory(prefix="dsaws-nginx-") as tmp:
        download = ["apt-get", "download", "-q", PACKAGE]
        if subprocess.run(download, cwd=tmp, capture_output=True).returncode != 0:
            _run(["apt-get", "update", "-q"], tmp)  # package lists never fetched on this machine
            _run(download, tmp)
        package = next(Path(tmp).glob(f"{PACKAGE}_*.deb"), None)
        if package is None:
            raise InstallFailed(f"apt-get download {PACKAGE} left no package behind")
        staging = target.with_name(target.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        _run(["dpkg-deb", "-x", str(package), str(staging)], tmp)
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    binary = target / "usr" / "sbin" / "nginx"
    if not binary.exists():
        raise InstallFailed(f"the {PACKAGE} package did not contain usr/sbin/nginx")
    return binary


def _run(command: list[str], cwd: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise InstallFailed(f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}")
