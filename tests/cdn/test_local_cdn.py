"""`dsaws serve --cdn-port`: nginx starts with the server, stops with it (even when the server
is killed), and its absence is explained rather than ignored."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ServerProcess, free_port

from core import cli
from core.cdn import LocalCdn, install_nginx, unpack_nginx_package


def listening(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, int(port))) == 0


def wait_until_closed(url: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not listening(url):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["terminate", "kill"])
def test_nginx_stops_with_the_server(how: str) -> None:
    install_nginx()
    server = ServerProcess(with_cdn=True).start()
    assert server.cdn_url is not None and server.process is not None
    try:
        assert listening(server.cdn_url)
        if how == "terminate":
            server.process.terminate()
        else:
            os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        assert wait_until_closed(server.cdn_url), "nginx outlived the server"
    finally:
        server.stop()


def test_without_nginx_the_command_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("core.cdn.find_nginx", lambda: None)
    assert cli.main(["serve", "--cdn-port", "1"]) != 0
    message = capsys.readouterr().err
    assert "dsaws install-nginx" in message and "apt-get install" in message


def test_debians_package_unpacks_into_a_fresh_directory(tmp_path: Path) -> None:
    """What `dsaws install-nginx` does on a machine with no nginx, into a directory whose
    parents do not exist yet."""
    binary = unpack_nginx_package(tmp_path / "not" / "yet" / "nginx")
    version = subprocess.run([str(binary), "-v"], capture_output=True, text=True, check=True)
    assert "nginx/" in version.stderr


def test_a_port_another_program_holds_is_not_taken_for_nginx() -> None:
    install_nginx()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(RuntimeError, match="nginx did not"):
            LocalCdn(port, 1).start(timeout=8)


@pytest.mark.parametrize("port", ["0", "65536", "99999", "http"])
def test_a_port_that_cannot_be_one_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as usage:
        cli.main(["serve", "--cdn-port", port])
    assert usage.value.code == 2
    assert "not a TCP port" in capsys.readouterr().err


def test_a_taken_cdn_port_stops_the_server_with_a_clear_message() -> None:
    install_nginx()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = str(squatter.getsockname()[1])
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "core.cli",
                "serve",
                "--port",
                str(free_port()),
                "--cdn-port",
                port,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 3
    assert "the local CDN could not start" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("port", ["-1", "65536", "http"])
def test_a_server_port_that_cannot_be_one_is_a_usage_error(
    port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as usage:
        cli.main(["serve", "--port", port])
    assert usage.value.code == 2
    assert "not a TCP port (0 to 65535)" in capsys.readouterr().err
