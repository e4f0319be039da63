"""The `dsaws` stream commands against `dsaws serve`, as a shell user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support import ROOT, ServerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with ServerProcess("--long-poll-timeout", "1") as server:
        yield f"{server.base_url}/v1/stream"


def dsaws(url: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "DSAWS_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "durable_streams_aws.core.cli", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


def test_a_json_stream_from_the_shell(url: str) -> None:
    assert dsaws(url, "create", "log", "--content-type", "application/json").returncode == 0
    appended = dsaws(url, "append", "log", stdin=b'{"n": 1}\n\n"two"\n[3]\n')
    assert appended.returncode == 0
    assert b"next offset: " in appended.stderr
    read = dsaws(url, "read", "log")
    assert [json.loads(line) for line in read.stdout.splitlines()] == [{"n": 1}, "two", [3]]
    resume = read.stderr.decode().split("next offset: ")[1].split()[0]
    dsaws(url, "append", "log", '{"n": 4}')
    later = dsaws(url, "read", "log", "--from", resume)
    assert later.stdout == b'{"n": 4}\n'
    head = json.loads(dsaws(url, "head", "log").stdout)
    assert head["content_type"] == "application/json" and head["closed"] is False


def test_bad_json_input_is_refused_before_anything_is_sent(url: str) -> None:
    dsaws(url, "create", "strict", "--content-type", "application/json")
    refused = dsaws(url, "append", "strict", stdin=b'{"ok": 1}\nnot json\n')
    assert refused.returncode == 5
    assert b"line 2 is not a JSON value" in refused.stderr
    assert dsaws(url, "read", "strict").stdout == b""


def test_text_tail_ends_at_the_close(url: str) -> None:
    dsaws(url, "create", "words", "--content-type", "text/plain")
    dsaws(url, "append", "words", "hello ", "world")
    dsaws(url, "close", "words")
    tail = dsaws(url, "tail", "words")
    assert tail.returncode == 0 and tail.stdout == b"hello world"
    assert b"closed: the stream is complete" in tail.stderr


def test_close_with_a_final_message(url: str) -> None:
    dsaws(url, "create", "ending", "--content-type", "application/json")
    dsaws(url, "append", "ending", '{"n": 1}')
    refused = dsaws(url, "close", "ending", "{not json")
    assert refused.returncode == 5 and b"not a JSON value" in refused.stderr
    assert json.loads(dsaws(url, "head", "ending").stdout)["closed"] is False
    assert dsaws(url, "close", "ending", '{"n": "last"}').returncode == 0
    read = dsaws(url, "read", "ending")
    assert read.stdout == b'{"n": 1}\n{"n": "last"}\n'
    assert b"closed: the stream is complete" in read.stderr
    dsaws(url, "create", "ending-text", "--content-type", "text/plain")
    assert dsaws(url, "close", "ending-text", "bye").returncode == 0
    assert dsaws(url, "read", "ending-text").stdout == b"bye"


@pytest.mark.parametrize("live", ["auto", "sse", "long-poll"])
def test_tail_follows_a_json_stream_until_it_closes(url: str, live: str) -> None:
    name = f"followed-{live}"
    dsaws(url, "create", name, "--content-type", "application/json")
    dsaws(url, "append", name, '{"n": 1}')
    env = {**os.environ, "DSAWS_URL": url}
    command = [sys.executable, "-m", "durable_streams_aws.core.cli", "tail", name, "--live", live]
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as tail:
        assert tail.stdout is not None
        assert json.loads(tail.stdout.readline()) == {"n": 1}  # caught up, now following
        dsaws(url, "append", name, '{"n": 2}')
        assert json.loads(tail.stdout.readline()) == {"n": 2}
        dsaws(url, "close", name)
        out, err = tail.communicate(timeout=30)
    assert tail.returncode == 0 and out == b""
    assert b"closed: the stream is complete" in err


def test_fork_and_delete(url: str) -> None:
    dsaws(url, "create", "trunk", "--content-type", "text/plain")
    dsaws(url, "append", "trunk", "abc")
    assert dsaws(url, "fork", "twig", "--from", "trunk").returncode == 0
    assert dsaws(url, "read", "twig").stdout == b"abc"
    assert dsaws(url, "delete", "twig").returncode == 0
    missing = dsaws(url, "head", "twig")
    assert missing.returncode == 3 and b"404" in missing.stderr


def test_errors_have_their_own_exit_status(url: str) -> None:
    dsaws(url, "create", "typed", "--content-type", "text/plain")
    assert dsaws(url, "create", "typed", "--content-type", "application/json").returncode == 4
    assert dsaws(url, "append", "nowhere", "x").returncode == 3
    unreachable = dsaws("http://127.0.0.1:9/v1/stream", "head", "x")
    assert unreachable.returncode == 6


def test_bulk_input_through_the_producer(url: str) -> None:
    dsaws(url, "create", "bulk", "--content-type", "application/json")
    lines = b"".join(b'{"n": %d}\n' % n for n in range(2000))
    done = dsaws(url, "append", "bulk", "--producer", "loader", "--close", stdin=lines)
    assert done.returncode == 0, done.stderr
    assert b"appended 2000 messages" in done.stderr
    read = dsaws(url, "read", "bulk")
    assert [json.loads(line)["n"] for line in read.stdout.splitlines()] == list(range(2000))
    assert b"closed" in read.stderr
    again = dsaws(url, "append", "bulk", "--producer", "loader", stdin=b'{"n": 1}\n')
    assert again.returncode != 0  # closed: nothing more goes in
