"""`dsaws smoke` against `dsaws serve`, and against the local CDN with access control on: it
passes where the deployment is sound and names the check that fails where it is not."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from auth_support import LOCKED_ORIGIN_ENV
from support import ServerProcess, run_dsaws

from durable_streams_aws.infra.local_cdn import install_nginx

pytestmark = pytest.mark.integration

AUTH_ENV = LOCKED_ORIGIN_ENV


def smoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    """Run `dsaws smoke`; its exit status, each check's result by name, and its output."""
    done = run_dsaws({**os.environ, **(env or {})}, "smoke", *args)
    rows = done.stdout.splitlines()
    assert rows and rows[0].startswith("check"), done.stdout + done.stderr
    results = {}
    for row in rows[1:-1]:
        name, rest = row.split("  ", 1)
        results[name.strip()] = rest.split()[0]
    return done.returncode, results, done.stdout


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerProcess]:
    with ServerProcess("--in-memory") as running:
        yield running


@pytest.fixture(scope="module")
def locked() -> Iterator[ServerProcess]:
    install_nginx()
    with ServerProcess("--auth", "--in-memory", env=AUTH_ENV, with_cdn=True) as running:
        yield running


def test_smoke_passes_against_the_local_server(plain: ServerProcess) -> None:
    status, results, output = smoke("--url", plain.base_url)
    assert status == 0, output
    for name in ("create", "append", "catch-up read", "long-poll woken by an append", "SSE"):
        assert results[name] == "ok", output
    for name in ("close", "fork", "delete"):
        assert results[name] == "ok", output
    assert results["CDN: repeated read is a hit"] == "skipped"
    assert "clean up" not in results  # nothing was left to clean up
    assert output.rstrip().endswith("12 checks, 0 failed")


def test_smoke_fails_with_a_clear_line_where_no_cdn_collapses(plain: ServerProcess) -> None:
    status, results, output = smoke("--url", plain.base_url, "--expect-cdn")
    assert status == 1
    assert results["CDN: repeated read is a hit"] == "FAILED"
    assert results["CDN: long-polls collapse"] == "FAILED"
    assert "no CDN in front" in output


def test_smoke_fails_when_an_anonymous_write_is_accepted(plain: ServerProcess) -> None:
    status, results, output = smoke("--url", plain.base_url, "--token", "not-checked-here")
    assert status == 1
    assert results["anonymous write refused"] == "FAILED"
    assert "anyone may write" in output
    assert results["delete"] == "ok"  # and it still cleaned up after itself


def test_smoke_passes_through_the_local_cdn_with_access_control(locked: ServerProcess) -> None:
    assert locked.cdn_url is not None
    minted = run_dsaws(
        {**os.environ, **AUTH_ENV}, "token", "read,append,create,delete,fork:public/smoke/"
    )
    assert minted.returncode == 0, minted.stderr
    status, results, output = smoke(
        "--url",
        locked.cdn_url,
        "--token",
        minted.stdout.strip(),
        "--prefix",
        "public/smoke/",
        "--origin",
        locked.base_url,
        "--expect-cdn",
    )
    assert status == 0, output
    assert set(results.values()) == {"ok"}, output
    assert "second hit" in output


def test_smoke_skips_the_cache_checks_when_anonymous_reads_are_refused(
    locked: ServerProcess,
) -> None:
    assert locked.cdn_url is not None
    minted = run_dsaws({**os.environ, **AUTH_ENV}, "token", "read,append,create,delete,fork:*")
    status, results, output = smoke(
        "--url", locked.cdn_url, "--token", minted.stdout.strip(), "--prefix", "private/smoke/"
    )
    assert status == 0, output
    assert results["CDN: repeated read is a hit"] == "skipped"
    assert "give a --prefix under a public read prefix" in output
    assert results["anonymous write refused"] == "ok"
