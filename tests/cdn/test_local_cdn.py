"""`dsaws serve --cdn-port`: nginx starts with the server, stops with it (even when the server
is killed), and its absence is explained rather than ignored."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
from support import ServerProcess, free_port

from durable_streams_aws.core import cli
from durable_streams_aws.infra.local_cdn import LocalCdn, install_nginx, unpack_nginx_package


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


def _cdn_workdirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("dsaws-cdn-*"))


@pytest.mark.parametrize("how", ["terminate", "hangup", "kill"])
def test_nginx_stops_with_the_server(how: str) -> None:
    """However the server ends, nginx ends with it; and unless it was killed outright, the
    CDN's directory (its configuration holds the origin secret, its access log signed URLs)
    is removed with it. uvicorn raised SIGTERM again after its own shutdown, which killed
    the process before it could clean up."""
    install_nginx()
    before = _cdn_workdirs()
    server = ServerProcess(with_cdn=True).start()
    assert server.cdn_url is not None and server.process is not None
    (workdir,) = _cdn_workdirs() - before
    assert (workdir / "nginx.conf").exists()
    try:
        assert listening(server.cdn_url)
        if how == "terminate":
            server.process.terminate()
        elif how == "hangup":
            server.process.send_signal(signal.SIGHUP)
        else:
            os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)
        assert wait_until_closed(server.cdn_url), "nginx outlived the server"
        if how != "kill":  # a killed server's directory goes at the next start
            assert not workdir.exists(), f"{how}: the CDN's directory was left behind"
            assert server.process.returncode != 0
    finally:
        server.stop()


def _origin(**env: str) -> ServerProcess:
    return ServerProcess(env=env).start()


def test_nginx_refuses_bodies_past_the_append_limit_before_spooling_them() -> None:
    """A 100 MB body was written to nginx's disk before the origin refused it, credentials or
    not. Declared (Content-Length) or streamed (chunked), nginx stops at the append limit
    plus a little headroom, with a JSON 413; below it, the origin answers as without a CDN."""
    install_nginx()
    origin = _origin(DS_MAX_APPEND_BYTES=str(1024 * 1024))
    try:
        with LocalCdn(free_port(), origin.port, max_append_bytes=1024 * 1024) as cdn:
            url = f"{cdn.base_url}/v1/stream/big"
            text = {"Content-Type": "text/plain"}
            assert httpx.put(url, headers=text).status_code == 201
            declared = httpx.post(url, headers=text, content=b"x" * (100 * 1024 * 1024))
            assert declared.status_code == 413
            assert "1048576 bytes" in declared.json()["message"]
            assert declared.headers["cache-control"] == "no-store"

            # Streamed (chunked): nginx answers once the limit is passed, having spooled at
            # most that much; what the client sends after the answer is dropped, not stored.
            sizes: list[int] = []
            sampling = threading.Event()

            def sample() -> None:
                while not sampling.is_set():
                    sizes.append(_size(cdn.workdir / "client_body"))
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                with socket.create_connection(("127.0.0.1", cdn.listen_port), timeout=10) as sock:
                    head = (
                        b"POST /v1/stream/big HTTP/1.1\r\nHost: a\r\n"
                        b"Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                    )
                    sent, response = _flood(sock, head, b"10000\r\n" + b"y" * 65536 + b"\r\n")
            finally:
                sampling.set()
                sampler.join()
            assert response.startswith(b"HTTP/1.1 413"), response[:200]
            assert sent < 8 * 1024 * 1024, f"{sent} bytes went in before the answer"
            assert max(sizes) < 2 * 1024 * 1024, f"nginx spooled {max(sizes)} bytes"
            # Just above the append limit: the origin's own 413 (a protocol error).
            over = httpx.post(url, headers=text, content=b"z" * (1024 * 1024 + 10))
            assert over.status_code == 413 and "1048576" in over.text
            fits = httpx.post(url, headers=text, content=b"w" * 1000)
            assert fits.status_code == 204
    finally:
        origin.stop()


def test_nginx_times_out_trickling_heads_and_bodies() -> None:
    install_nginx()
    origin = _origin()
    try:
        with LocalCdn(free_port(), origin.port, header_timeout=1, body_timeout=1) as cdn:
            with socket.create_connection(("127.0.0.1", cdn.listen_port), timeout=5) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\n")
                started = time.monotonic()
                assert _until_closed(sock) < 5
                assert time.monotonic() - started < 5
            with socket.create_connection(("127.0.0.1", cdn.listen_port), timeout=5) as sock:
                sock.sendall(
                    b"POST /v1/stream/t HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: 100\r\n\r\nfive!"
                )
                started = time.monotonic()
                received = _until_closed(sock)
                assert time.monotonic() - started < 5, received
    finally:
        origin.stop()


def _size(directory: Path) -> int:
    total = 0
    for each in directory.rglob("*"):
        with contextlib.suppress(FileNotFoundError):  # removed as it was being counted
            total += each.stat().st_size if each.is_file() else 0
    return total


def _flood(sock: socket.socket, head: bytes, filler: bytes) -> tuple[int, bytes]:
    """Sends `head`, then `filler` until an answer comes (at most 100 MB); the bytes sent and
    the start of the answer."""
    sock.sendall(head)
    sent = len(head)
    try:
        while sent < 100 * 1024 * 1024:
            sock.sendall(filler)
            sent += len(filler)
            if select.select([sock], [], [], 0)[0]:
                break
        return sent, sock.recv(65536)
    except (BrokenPipeError, ConnectionResetError):
        return sent, b""


def _until_closed(sock: socket.socket) -> float:
    """Reads until the peer closes; the seconds it took."""
    started = time.monotonic()
    sock.settimeout(10)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def test_without_nginx_the_command_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("durable_streams_aws.infra.local_cdn.find_nginx", lambda: None)
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
                "durable_streams_aws.core.cli",
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
