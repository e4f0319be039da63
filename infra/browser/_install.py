"""Finding Debian's Chromium and chromedriver, and installing them with apt-get when missing.

Unlike nginx (unpacked for the user), Chromium is installed as a system package: it needs its
shared libraries from a dozen other packages, which only apt-get resolves. So only root
installs it; anyone else is told what to install (`ChromiumUnavailable`, which the tests skip
with).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

BROWSER = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
# Debian's packages of the two (bookworm and later); chromium-driver matches chromium's version.
PACKAGES = ("chromium", "chromium-driver")
BROWSER_VARIABLE = "DSAWS_CHROMIUM"
DRIVER_VARIABLE = "DSAWS_CHROMEDRIVER"
INSTALL_HINT = (
    f"install Debian's Chromium and its driver as root (`apt-get install {' '.join(PACKAGES)}`; "
    "the browser tests do it themselves when run as root), or point "
    f"{BROWSER_VARIABLE} and {DRIVER_VARIABLE} at a Chromium and a chromedriver of one version"
)
_APT_SECONDS = 900


class ChromiumUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class ChromiumPaths:
    browser: str
    driver: str


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _apt(command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=_APT_SECONDS)


@dataclass(frozen=True)
class Host:
    """What finding and installing ask of the machine; the unit tests hand in fakes."""

    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    executable: Callable[[str], bool] = _executable
    which: Callable[[str], str | None] = shutil.which
    euid: Callable[[], int] = os.geteuid
    run: Callable[[list[str]], subprocess.CompletedProcess[str]] = _apt


def _wanted(host: Host) -> ChromiumPaths:
    return ChromiumPaths(
        browser=host.environ.get(BROWSER_VARIABLE) or BROWSER,
        driver=host.environ.get(DRIVER_VARIABLE) or DRIVER,
    )


def _missing(host: Host, paths: ChromiumPaths) -> list[str]:
    return [path for path in (paths.browser, paths.driver) if not host.executable(path)]


def find_chromium(host: Host | None = None) -> ChromiumPaths | None:
    """Chromium and chromedriver from $DSAWS_CHROMIUM and $DSAWS_CHROMEDRIVER, or where
    Debian's packages put them; None unless both are there."""
    host = host or Host()
    paths = _wanted(host)
    return None if _missing(host, paths) else paths


def install_chromium(host: Host | None = None) -> ChromiumPaths:
    """Chromium and chromedriver, installed with apt-get first when missing and running as
    root (the package lists updated only if the install fails without it)."""
    host = host or Host()
    paths = _wanted(host)
    missing = _missing(host, paths)
    if not missing:
        return paths
    named = [name for name in (BROWSER_VARIABLE, DRIVER_VARIABLE) if host.environ.get(name)]
    if named:
        raise ChromiumUnavailable(
            f"{' and '.join(missing)} (from {', '.join(named)}) is not an executable file"
        )
    lacking = f"{' and '.join(missing)} missing"
    if host.which("apt-get") is None:
        raise ChromiumUnavailable(f"{lacking}, and no apt-get here to install them: {INSTALL_HINT}")
    if host.euid() != 0:
        raise ChromiumUnavailable(f"{lacking}, and installing them needs root: {INSTALL_HINT}")
    _apt_install(host)
    still = _missing(host, paths)
    if still:
        raise ChromiumUnavailable(
            f"apt-get installed {' '.join(PACKAGES)} but {' and '.join(still)} is still missing"
        )
    return paths


def _apt_install(host: Host) -> None:
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    if host.run(install).returncode == 0:
        return
    # Package lists never fetched on this machine, or stale (their .debs gone from the mirror).
    for command in (["apt-get", "update", "-q"], install):
        done = host.run(command)
        if done.returncode != 0:
            failure = (done.stderr or done.stdout).strip()[-500:]
            raise ChromiumUnavailable(f"{' '.join(command)} failed: {failure}")
