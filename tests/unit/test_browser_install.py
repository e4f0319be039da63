"""How the browser tests get Chromium and chromedriver (infra/browser), on a pretend machine:
found where Debian puts them; installed with apt-get when missing and root (the package lists
updated only when the install fails without); otherwise a reason to skip with."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

import pytest

from durable_streams_aws.infra.browser import (
    ChromiumPaths,
    ChromiumUnavailable,
    Host,
    find_chromium,
    install_chromium,
)

BROWSER, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
INSTALL = [
    "apt-get",
    "install",
    "-y",
    "-q",
    "--no-install-recommends",
    "chromium",
    "chromium-driver",
]
UPDATE = ["apt-get", "update", "-q"]


@dataclass
class Machine:
    """Files present, whether root, whether apt-get is there, and how each apt-get command
    ends; it records the commands, and an install that succeeds puts both files in place."""

    files: set[str] = field(default_factory=set)
    root: bool = True
    apt: bool = True
    fails: list[list[str]] = field(default_factory=list)  # each fails once, in order
    environ: dict[str, str] = field(default_factory=dict)
    installs: bool = True  # whether a successful install puts the files in place
    ran: list[list[str]] = field(default_factory=list)

    def run(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        self.ran.append(command)
        if self.fails and self.fails[0] == command:
            self.fails.pop(0)
            return subprocess.CompletedProcess(command, 100, "", f"{command[1]}: E: it failed")
        if command == INSTALL and self.installs:
            self.files |= {BROWSER, DRIVER}
        return subprocess.CompletedProcess(command, 0, "", "")

    def host(self) -> Host:
        return Host(
            environ=self.environ,
            executable=lambda path: path in self.files,
            which=lambda tool: f"/usr/bin/{tool}" if self.apt else None,
            euid=lambda: 0 if self.root else 1000,
            run=self.run,
        )


def test_found_where_debian_puts_them() -> None:
    machine = Machine(files={BROWSER, DRIVER})
    assert find_chromium(machine.host()) == ChromiumPaths(BROWSER, DRIVER)
    assert install_chromium(machine.host()) == ChromiumPaths(BROWSER, DRIVER)
    assert machine.ran == []


def test_the_variables_name_other_files() -> None:
    elsewhere = {"DSAWS_CHROMIUM": "/opt/c/chrome", "DSAWS_CHROMEDRIVER": "/opt/c/driver"}
    machine = Machine(files={"/opt/c/chrome", "/opt/c/driver"}, environ=elsewhere)
    assert install_chromium(machine.host()) == ChromiumPaths("/opt/c/chrome", "/opt/c/driver")
    machine.files = {BROWSER, DRIVER}
    with pytest.raises(ChromiumUnavailable, match="DSAWS_CHROMIUM, DSAWS_CHROMEDRIVER"):
        install_chromium(machine.host())
    assert machine.ran == []  # Debian's packages would not put them there


def test_root_installs_both_packages() -> None:
    machine = Machine(files={BROWSER})  # the driver alone missing
    assert find_chromium(machine.host()) is None
    assert install_chromium(machine.host()) == ChromiumPaths(BROWSER, DRIVER)
    assert machine.ran == [INSTALL]


def test_package_lists_are_updated_when_the_install_fails_without() -> None:
    machine = Machine(fails=[INSTALL])
    assert install_chromium(machine.host()) == ChromiumPaths(BROWSER, DRIVER)
    assert machine.ran == [INSTALL, UPDATE, INSTALL]


@pytest.mark.parametrize("fails", [[INSTALL, UPDATE], [INSTALL, INSTALL]])
def test_a_failing_apt_get_is_reported(fails: list[list[str]]) -> None:
    machine = Machine(fails=fails)
    with pytest.raises(ChromiumUnavailable, match=f"{' '.join(fails[-1])} failed: .*E: it"):
        install_chromium(machine.host())


def test_an_install_that_leaves_them_missing_is_reported() -> None:
    machine = Machine(installs=False)
    with pytest.raises(ChromiumUnavailable, match="still missing"):
        install_chromium(machine.host())


def test_without_root_the_reason_says_what_to_install() -> None:
    machine = Machine(root=False)
    with pytest.raises(ChromiumUnavailable) as refused:
        install_chromium(machine.host())
    message = str(refused.value)
    assert f"{BROWSER} and {DRIVER} missing" in message and "needs root" in message
    assert "apt-get install chromium chromium-driver" in message
    assert machine.ran == []


def test_without_apt_get_the_reason_says_what_to_install() -> None:
    machine = Machine(apt=False)
    with pytest.raises(ChromiumUnavailable, match=r"no apt-get here.*DSAWS_CHROMIUM"):
        install_chromium(machine.host())
    assert machine.ran == []


def test_apt_get_runs_without_questions(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def run(command: list[str], **options: object) -> subprocess.CompletedProcess[str]:
        seen.update(options, command=command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    Host().run(INSTALL)
    assert seen["command"] == INSTALL
    env = seen["env"]
    assert isinstance(env, dict) and env["DEBIAN_FRONTEND"] == "noninteractive"
