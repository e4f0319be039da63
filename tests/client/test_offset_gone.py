"""Retention seen from the client (issue 40): a read whose offset the stream's retention policy
dropped raises `OffsetGone` naming the earliest offset still kept, on every read path of both
clients; `on_gone="earliest"` goes on from there and says so on the next batch; HEAD tells the
earliest offset and the policy, create sends one; and `dsaws read/tail/head/create` say the
same from the shell. Scripted servers (httpx.MockTransport), then `dsaws serve`: one that keeps
every policy, and one whose own retention runs cut streams by size and compact them, read at
offsets they dropped by both clients and by `dsaws read`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from flavours import StreamOpener
from scripted import FAST, offset, scripted

import durable_streams_aws.client as client_package
from durable_streams_aws.client import (
    BadRequest,
    Batch,
    DurableStream,
    Offset,
    OffsetGone,
    StreamGone,
)
from durable_streams_aws.client import commands as commands_module
from durable_streams_aws.client._wire import (
    ReadSession,
    create_request,
    raise_for_status,
    read_request,
    restart_after_gone,
    stream_info,
)

URL = "http://server.test/v1/stream/s"


def gone_answer(asked: str, earliest: str, *, header: bool = True, body: bool = True) -> Any:
    """The 410 a retention-aware server gives a read at `asked` (as an httpx.Response whose
    request is a read at that offset)."""
    request = httpx.Request("GET", URL, params={"offset": asked})
    headers = {"Stream-Earliest-Offset": earliest} if header else {}
    content = {"error": "offset_gone", "message": "dropped", "earliest_offset": earliest}
    return httpx.Response(
        410, headers=headers, json=content if body else {"error": "x"}, request=request
    )


# ---------------------------------------------------------------- the error itself


def test_offset_gone_is_exported_and_is_a_stream_gone() -> None:
    assert client_package.OffsetGone is OffsetGone and "OffsetGone" in client_package.__all__
    assert issubclass(OffsetGone, StreamGone)


@pytest.mark.parametrize(
    ("header", "body"), [(True, True), (True, False), (False, True)], ids=["both", "header", "body"]
)
def test_a_410_naming_the_earliest_offset_is_offset_gone(header: bool, body: bool) -> None:
    with pytest.raises(OffsetGone) as raised:
        raise_for_status(gone_answer(offset(3), offset(10), header=header, body=body))
    gone = raised.value
    assert gone.status == 410
    assert gone.offset == Offset(offset(3)) and gone.earliest_offset == Offset(offset(10))
    message = str(gone)
    assert offset(3) in message and offset(10) in message
    assert "on_gone='earliest'" in message and "retention" in message
    assert URL in message


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(410, json={"error": "gone", "message": "stream deleted"}),
        httpx.Response(410),
        httpx.Response(410, text="Gone"),
    ],
)
def test_a_plain_410_still_means_the_stream_was_deleted(response: httpx.Response) -> None:
    with pytest.raises(StreamGone) as raised:
        raise_for_status(response)
    assert type(raised.value) is StreamGone


def test_an_offset_gone_without_an_earliest_offset_says_to_read_from_the_beginning() -> None:
    response = httpx.Response(410, json={"error": "offset_gone"})
    with pytest.raises(OffsetGone) as raised:
        raise_for_status(response)
    assert raised.value.earliest_offset is None and raised.value.offset is None
    assert "Offset.BEGINNING" in str(raised.value)


def test_on_gone_takes_only_its_two_values(open_stream: StreamOpener) -> None:
    transport, seen = scripted()
    stream = open_stream(URL, transport=transport, retry=FAST)
    with pytest.raises(ValueError, match="on_gone"):
        list(stream.read(on_gone="skip"))  # type: ignore[arg-type]
    assert seen == []


# ---------------------------------------------------------------- where to go on from


def test_a_restart_goes_to_the_earliest_offset_only_when_asked_and_forward() -> None:
    gone = gone_answer(offset(3), offset(10))
    assert restart_after_gone(gone, Offset(offset(3)), "earliest") == Offset(offset(10))
    assert restart_after_gone(gone, Offset(offset(3)), "raise") is None
    # a server calling its own earliest offset (or one before it) gone: raising, not a loop
    assert restart_after_gone(gone, Offset(offset(10)), "earliest") is None
    assert restart_after_gone(gone, Offset(offset(12)), "earliest") is None
    # a bounded read whose whole range was dropped has nothing to go on to
    assert restart_after_gone(gone, Offset(offset(3)), "earliest", Offset(offset(10))) is None
    assert restart_after_gone(gone, Offset(offset(3)), "earliest", Offset(offset(11))) == Offset(
        offset(10)
    )
    # a deleted stream is never restarted
    deleted = httpx.Response(410, json={"error": "gone"})
    assert restart_after_gone(deleted, Offset(offset(3)), "earliest") is None
    # not told where: from the beginning, which starts at the earliest (once)
    unsaid = httpx.Response(410, json={"error": "offset_gone"})
    assert restart_after_gone(unsaid, Offset(offset(3)), "earliest") == Offset.BEGINNING
    assert restart_after_gone(unsaid, Offset.BEGINNING, "earliest") is None


def test_snapshot_offsets_are_opaque_tokens_that_order_as_strings() -> None:
    snapshot = f"{0:016d}_{99:016d}_s"
    gone = gone_answer(offset(40), snapshot)
    assert restart_after_gone(gone, Offset(offset(40)), "earliest") == Offset(snapshot)
    assert Offset(offset(99)) < Offset(snapshot) < Offset(offset(100))


def test_a_session_going_on_marks_the_next_batch_only() -> None:
    session = ReadSession(Offset(offset(3)), None, on_gone="earliest")
    assert session.accept(gone_answer(offset(3), offset(10))) is None
    assert session.offset == Offset(offset(10)) and not session.finished
    assert session.request() == read_request(Offset(offset(10)), None, None)
    headers = {"Stream-Next-Offset": offset(12), "Content-Type": "application/octet-stream"}
    batch = session.accept(httpx.Response(200, content=b"ab", headers=headers))
    assert batch is not None and batch.skipped_from == Offset(offset(3))
    assert batch.offset == Offset(offset(10)) and batch.data == b"ab"
    later = session.accept(httpx.Response(200, content=b"c", headers=headers))
    assert later is not None and later.skipped_from is None


# ---------------------------------------------------------------- HEAD and create


def test_head_tells_the_earliest_offset_and_the_policy() -> None:
    info = stream_info(
        httpx.Response(
            200,
            headers={
                "Stream-Next-Offset": offset(50),
                "Stream-Earliest-Offset": offset(20),
                "Stream-Retention": "max-age=86400, max-bytes=1000",
            },
        )
    )
    assert info.earliest_offset == Offset(offset(20))
    assert info.retention == "max-age=86400, max-bytes=1000"
    plain = stream_info(httpx.Response(200, headers={"Stream-Next-Offset": offset(5)}))
    assert plain.earliest_offset is None and plain.retention is None


def test_create_sends_the_retention_policy() -> None:
    assert create_request("application/json", retention="compact").headers["Stream-Retention"] == (
        "compact"
    )
    assert "Stream-Retention" not in create_request("application/json").headers


def test_both_clients_create_with_retention_and_head_it(open_stream: StreamOpener) -> None:
    answer = {
        "Stream-Next-Offset": offset(0),
        "Content-Type": "application/json",
        "Stream-Retention": "max-age=86400",
    }
    transport, seen = scripted(
        lambda r: httpx.Response(201, headers=answer),
        lambda r: httpx.Response(200, headers=answer | {"Stream-Earliest-Offset": offset(7)}),
    )
    stream = open_stream(URL, transport=transport, retry=FAST)
    created = stream.create("application/json", retention="max-age=86400")
    assert seen[0].method == "PUT" and seen[0].headers["Stream-Retention"] == "max-age=86400"
    assert created.retention == "max-age=86400" and created.earliest_offset is None
    info = stream.head()
    assert info.earliest_offset == Offset(offset(7)) and info.retention == "max-age=86400"


# ---------------------------------------------------------------- a retaining server


class RetainingStream:
    """A JSON stream of one message per position (offset(i) is before message i) that keeps
    messages from `first` on: a read below it answers 410 naming offset(first), a read at -1
    starts there. `drops` moves `first` after the n-th read (a reader falling behind: what
    arrives meanwhile is appended up to the new `first`). Live reads at the tail see the next
    of `arriving`, then the close."""

    def __init__(
        self,
        messages: list[object],
        first: int,
        arriving: list[object] | None = None,
        drops: dict[int, int] | None = None,
        sse: bool = True,
    ) -> None:
        self.messages = list(messages)
        self.first = first
        self.arriving = list(arriving or [])
        self.drops = dict(drops or {})
        self.sse = sse
        self.closed = False
        self.reads: list[dict[str, str]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "HEAD":
            return httpx.Response(200, headers=self._headers(len(self.messages)))
        params = dict(request.url.params)
        self.reads.append(params)
        try:
            return self._answer(params)
        finally:
            if len(self.reads) in self.drops:
                self.first = self.drops[len(self.reads)]
                while len(self.messages) < self.first:
                    self.messages.append(self.arriving.pop(0))

    def _answer(self, params: dict[str, str]) -> httpx.Response:
        token = params["offset"]
        start = self.first if token == "-1" else int(token.split("_")[1])
        if start < self.first:
            earliest = offset(self.first)
            return httpx.Response(
                410,
                headers={"Stream-Earliest-Offset": earliest},
                json={"error": "offset_gone", "message": "gone", "earliest_offset": earliest},
            )
        live = params.get("live")
        if live and start == len(self.messages):
            self._arrive()
        if live == "sse":
            if not self.sse:
                return httpx.Response(405, text="no SSE")
            return self._events(start)
        headers = self._headers(len(self.messages)) | {"Stream-Up-To-Date": "true"}
        if live and start == len(self.messages):
            return httpx.Response(204, headers=headers)
        end = int(params["until"].split("_")[1]) if "until" in params else len(self.messages)
        headers["Stream-Next-Offset"] = offset(end)
        return httpx.Response(200, json=self.messages[start:end], headers=headers)

    def _arrive(self) -> None:
        if self.arriving:
            self.messages.append(self.arriving.pop(0))
        else:
            self.closed = True

    def _headers(self, position: int) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Stream-Next-Offset": offset(position)}
        if self.first:
            headers["Stream-Earliest-Offset"] = offset(self.first)
        if self.closed:
            headers["Stream-Closed"] = "true"
        return headers

    def _events(self, start: int) -> httpx.Response:
        events = b""
        if start < len(self.messages):
            events += f"event: data\ndata:{json.dumps(self.messages[start:])}\n\n".encode()
        control: dict[str, object] = {"streamNextOffset": offset(len(self.messages))}
        control |= {"streamClosed": True} if self.closed else {"upToDate": True}
        events += f"event: control\ndata:{json.dumps(control)}\n\n".encode()
        return httpx.Response(200, content=events, headers={"Content-Type": "text/event-stream"})

    def offsets_read(self) -> list[str]:
        return [params["offset"] for params in self.reads]


def read_all(open_stream: StreamOpener, fake: RetainingStream, **options: Any) -> list[Batch]:
    stream = open_stream(
        URL, transport=httpx.MockTransport(fake.handle), retry=FAST, content_type="application/json"
    )
    start = options.pop("start", Offset(offset(1)))
    return list(stream.read(start, **options))


def messages(batches: list[Batch]) -> list[object]:
    return [m for batch in batches for m in batch.messages or []]


READS: list[dict[str, Any]] = [
    {"live": None},
    {"live": "long-poll"},
    {"live": "sse"},
    {"live": "auto"},
]
READ_IDS = ["catch-up", "long-poll", "sse", "auto"]


@pytest.mark.parametrize("read", READS, ids=READ_IDS)
def test_every_read_of_a_dropped_offset_raises_offset_gone(
    open_stream: StreamOpener, read: dict[str, Any]
) -> None:
    fake = RetainingStream(list("abcdef"), first=4, arriving=["g"])
    with pytest.raises(OffsetGone) as raised:
        read_all(open_stream, fake, **read)
    assert raised.value.offset == Offset(offset(1))
    assert raised.value.earliest_offset == Offset(offset(4))
    assert fake.offsets_read() == [offset(1)]  # not retried: a 410 is an answer


@pytest.mark.parametrize("read", READS, ids=READ_IDS)
def test_every_read_goes_on_from_the_earliest_offset_when_asked(
    open_stream: StreamOpener, read: dict[str, Any]
) -> None:
    fake = RetainingStream(list("abcdef"), first=4, arriving=["g"])
    batches = read_all(open_stream, fake, on_gone="earliest", **read)
    expected = ["e", "f"] if read["live"] is None else ["e", "f", "g"]
    assert messages(batches) == expected
    assert batches[0].skipped_from == Offset(offset(1))
    assert batches[0].offset == Offset(offset(4))
    assert all(batch.skipped_from is None for batch in batches[1:])
    assert fake.offsets_read()[:2] == [offset(1), offset(4)]
    if read["live"] is not None:
        assert batches[-1].closed


@pytest.mark.parametrize("read", READS[1:], ids=READ_IDS[1:])
def test_a_live_reader_that_falls_behind_is_told_or_goes_on(
    open_stream: StreamOpener, read: dict[str, Any]
) -> None:
    """The first read works; by the second, retention dropped what the reader had not reached
    (here: everything up to position 5, though the reader stands at 2)."""
    fake = RetainingStream(list("ab"), first=0, arriving=list("cdefg"), drops={1: 5})
    with pytest.raises(OffsetGone) as raised:
        read_all(open_stream, fake, start=Offset.BEGINNING, **read)
    assert raised.value.offset == Offset(offset(2))
    assert raised.value.earliest_offset == Offset(offset(5))

    fake = RetainingStream(list("ab"), first=0, arriving=list("cdefg"), drops={1: 5})
    batches = read_all(open_stream, fake, start=Offset.BEGINNING, on_gone="earliest", **read)
    assert messages(batches) == ["a", "b", "f", "g"] and batches[-1].closed  # c-e dropped
    skipped = [batch for batch in batches if batch.skipped_from is not None]
    assert len(skipped) == 1
    assert skipped[0].skipped_from == Offset(offset(2)) and skipped[0].offset == Offset(offset(5))


def test_auto_falling_back_to_long_poll_keeps_the_skip_to_tell(
    open_stream: StreamOpener,
) -> None:
    """After the catch-up, SSE finds its offset gone, goes on from the earliest, and is then
    refused: the long-poll it falls back to hands over the skip with its first batch."""
    fake = RetainingStream(list("ab"), first=0, arriving=["c"], drops={1: 3}, sse=False)
    batches = read_all(open_stream, fake, start=Offset.BEGINNING, live="auto", on_gone="earliest")
    assert messages(batches) == ["a", "b"] and batches[-1].closed  # c dropped
    assert [batch.skipped_from for batch in batches] == [None, Offset(offset(2))]
    assert batches[-1].offset == Offset(offset(3))
    assert [params.get("live") for params in fake.reads] == [None, "sse", "sse", "long-poll"]


def test_a_server_that_calls_its_earliest_offset_gone_is_not_followed_in_a_loop(
    open_stream: StreamOpener,
) -> None:
    earliest = offset(4)
    transport, seen = scripted(*[lambda r: gone_answer(r.url.params["offset"], earliest)] * 3)
    stream = open_stream(URL, transport=transport, retry=FAST)
    with pytest.raises(OffsetGone) as raised:
        list(stream.read(Offset(offset(1)), on_gone="earliest"))
    assert raised.value.offset == Offset(earliest)
    assert [r.url.params["offset"] for r in seen] == [offset(1), earliest]


def test_a_bounded_read_whose_range_is_gone_raises_even_when_asked_to_go_on(
    open_stream: StreamOpener,
) -> None:
    fake = RetainingStream(list("abcdef"), first=4)
    with pytest.raises(OffsetGone):
        read_all(open_stream, fake, until=Offset(offset(3)), on_gone="earliest")
    fake = RetainingStream(list("abcdef"), first=4)
    batches = read_all(open_stream, fake, until=Offset(offset(5)), on_gone="earliest")
    assert messages(batches) == ["e"] and batches[0].skipped_from == Offset(offset(1))


def test_a_deleted_stream_stays_stream_gone_on_every_path(open_stream: StreamOpener) -> None:
    for live in (None, "long-poll", "sse"):
        transport, _ = scripted(lambda r: httpx.Response(410, json={"error": "gone"}))
        stream = open_stream(URL, transport=transport, retry=FAST, content_type="text/plain")
        with pytest.raises(StreamGone) as raised:
            list(stream.read(Offset(offset(1)), live=live, on_gone="earliest"))
        assert type(raised.value) is StreamGone


# ---------------------------------------------------------------- the command line


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Runs `dsaws` stream commands in this process against a scripted server."""

    def run(handler: Any, *argv: str) -> int:
        transport = httpx.MockTransport(handler)

        def opened(url: str, **options: Any) -> DurableStream:
            return DurableStream(
                url, client=httpx.Client(transport=transport), retry=FAST, **options
            )

        monkeypatch.setattr(commands_module, "DurableStream", opened)
        return commands_module.main([*argv, "--url", "http://server.test/v1/stream"])

    return run


def test_dsaws_read_of_a_dropped_offset_says_where_to_start_and_exits_9(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = RetainingStream(list("abcdef"), first=4)
    assert shell(fake.handle, "read", "s", "--from", offset(1)) == 9
    assert commands_module.EXIT_OFFSET_GONE == 9
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("dsaws read: ")
    assert offset(1) in lines[0] and f"--from {offset(4)}" in lines[0]
    assert "--from-earliest" in lines[0]


@pytest.mark.parametrize("command", [["read", "s"], ["tail", "s", "--live", "long-poll"]])
def test_dsaws_read_and_tail_from_earliest_go_on_and_say_so(
    shell: Any, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    fake = RetainingStream(list("abcdef"), first=4, arriving=["g"])
    assert shell(fake.handle, *command, "--from", offset(1), "--from-earliest") == 0
    out, err = capsys.readouterr()
    expected = ["e", "f"] if command[0] == "read" else ["e", "f", "g"]
    assert [json.loads(line) for line in out.splitlines()] == expected
    assert f"offset {offset(1)} was gone" in err and f"going on from {offset(4)}" in err


def test_dsaws_tail_without_the_flag_exits_9(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = RetainingStream(list("abcdef"), first=4)
    assert shell(fake.handle, "tail", "s", "--from", offset(1), "--live", "sse") == 9
    assert "--from-earliest" in capsys.readouterr().err


def test_dsaws_read_of_a_deleted_stream_still_exits_3(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shell(lambda r: httpx.Response(410, json={"error": "gone"}), "read", "s") == 3
    assert "--from-earliest" not in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["max-age=86400", "compact", "max-age=60; max-bytes=1000"])
def test_dsaws_create_sends_the_retention(
    shell: Any, capsys: pytest.CaptureFixture[str], policy: str
) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, headers={"Stream-Next-Offset": offset(0)})

    assert shell(handler, "create", "s", "--retention", policy) == 0
    assert seen[0].method == "PUT" and seen[0].headers["Stream-Retention"] == policy
    assert shell(handler, "create", "t") == 0
    assert "Stream-Retention" not in seen[1].headers


def test_dsaws_head_shows_the_earliest_offset_and_the_policy(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    headers = {
        "Content-Type": "application/json",
        "Stream-Next-Offset": offset(9),
        "Stream-Earliest-Offset": offset(4),
        "Stream-Retention": "max-bytes=100",
    }
    assert shell(lambda r: httpx.Response(200, headers=headers), "head", "s") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["earliest_offset"] == offset(4) and shown["retention"] == "max-bytes=100"
    plain = {"Content-Type": "text/plain", "Stream-Next-Offset": offset(9)}
    assert shell(lambda r: httpx.Response(200, headers=plain), "head", "s") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["earliest_offset"] is None and shown["retention"] is None


# ---------------------------------------------------------------- against `dsaws serve`


@pytest.fixture(scope="module")
def served() -> Any:
    from support import ServerProcess

    with ServerProcess("--long-poll-timeout", "1") as server:
        yield f"{server.base_url}/v1/stream"


def dsaws(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable_streams_aws.core.cli", *args, "--url", url],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.integration
def test_a_real_server_keeps_the_policy_a_create_sends(
    open_stream: StreamOpener, served: str
) -> None:
    name = f"kept-{open_stream.flavour}"
    with open_stream(f"{served}/{name}") as stream:
        created = stream.create("application/json", retention="max-age=86400")
        assert created.retention == "max-age=86400"
        info = stream.head()
        assert info.retention == created.retention and info.earliest_offset is None
        stream.append([{"n": 1}])
        batches = list(stream.read(on_gone="earliest"))  # nothing dropped: reads as ever
        assert messages(batches) == [{"n": 1}] and batches[0].skipped_from is None
    with open_stream(f"{served}/{name}-bad") as stream, pytest.raises(BadRequest):
        stream.create("application/json", retention="max-age=soon")
    if open_stream.flavour == "sync":
        json_type = ("--content-type", "application/json")
        assert dsaws(served, "create", "cli", *json_type, "--retention", "compact").returncode == 0
        shown = json.loads(dsaws(served, "head", "cli").stdout)
        assert shown["retention"] == "compact" and shown["earliest_offset"] is None
        refused = dsaws(served, "create", "cli-bad", "--retention", "max-bytes=-1")
        assert refused.returncode == 5 and "Stream-Retention" in refused.stderr


# `dsaws serve` sealing everything every 0.2 s into segments of about 500 bytes (pages of 250:
# a segment ends where a page does), and running retention and compaction every 0.3 s with
# cuts in effect at once.
RETAINING = {
    "DS_SEAL_INTERVAL": "0.2",
    "DS_SEAL_HOT_BYTES": "0",
    "DS_SEGMENT_BYTES": "500",
    "DS_SEAL_PAGE_BYTES": "250",
    "DS_RETENTION_INTERVAL": "0.3",
    "DS_RETENTION_DELAY": "0",
    "DS_COMPACTION_MIN_BYTES": "1",
}


@pytest.fixture(scope="module")
def retaining() -> Any:
    from support import ServerProcess

    with ServerProcess("--long-poll-timeout", "1", env=RETAINING) as server:
        yield f"{server.base_url}/v1/stream"


def settled_earliest(stream: DurableStream, within: float = 30.0) -> Offset:
    """The stream's earliest offset once the server's runs have cut it and stopped moving it
    (the same twice in a row). It asks every 1.5 s: the sealer and the retention run of
    `dsaws serve` wait for a second without requests, and a HEAD is one. (The test then asks
    without such pauses, so the runs keep waiting meanwhile.)"""
    deadline = time.monotonic() + within
    earliest = None
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = stream.head().earliest_offset
        if now is not None and now == earliest:
            return now
        earliest = now
    raise AssertionError(f"no settled earliest offset within {within} s (last: {earliest})")


def state_change(n: int) -> dict[str, Any]:
    kind = "insert" if n < 5 else "update"
    return {"type": "row", "key": f"k{n % 5}", "value": {"n": n}, "headers": {"operation": kind}}


@pytest.mark.integration
@pytest.mark.parametrize("policy", ["max-bytes=1000", "compact"])
def test_a_real_servers_retention_run_makes_old_offsets_offset_gone(
    open_stream: StreamOpener, retaining: str, policy: str
) -> None:
    """Written, sealed and cut by the server's own runs: a read at an offset handed out before
    the cut raises OffsetGone naming the earliest offset (a plain one, or a snapshot's token),
    `on_gone="earliest"` reads on from there, and `dsaws read` exits 9 saying where to start."""
    name = f"cut-{policy.split('=')[0]}-{open_stream.flavour}"
    written = [
        state_change(n) if policy == "compact" else {"n": n, "pad": "x" * 30} for n in range(60)
    ]
    with open_stream(f"{retaining}/{name}") as stream:
        assert stream.create("application/json", retention=policy).retention == policy
        offsets = [stream.append([message]) for message in written]
        earliest = settled_earliest(stream)
        old = offsets[0]
        assert old < earliest

        with pytest.raises(OffsetGone) as raised:
            list(stream.read(old))
        assert raised.value.status == 410
        assert raised.value.offset == old and raised.value.earliest_offset == earliest

        batches = list(stream.read(old, on_gone="earliest"))
        assert batches[0].skipped_from == old and batches[0].offset == earliest
        assert all(batch.skipped_from is None for batch in batches[1:])
        assert batches[-1].next_offset == offsets[-1]
        kept = messages(batches)
        if policy == "compact":
            assert str(earliest).endswith("_s")
            assert kept[0] == {"headers": {"control": "snapshot-start"}}
            rows = {m["key"]: m["value"] for m in kept if "key" in m}
            assert rows == {f"k{k}": {"n": 55 + k} for k in range(5)}  # the last of each
        else:
            assert earliest in offsets and 0 < len(kept) < len(written)
            assert kept == written[offsets.index(earliest) + 1 :]
            assert len(json.dumps(kept)) >= 1000  # at least the newest 1000 bytes kept

    if open_stream.flavour == "sync":
        refused = dsaws(retaining, "read", name, "--from", str(old))
        assert refused.returncode == 9 and refused.stdout == ""
        (line,) = refused.stderr.splitlines()
        assert line.startswith("dsaws read: ") and str(old) in line
        assert f"--from {earliest}" in line and "--from-earliest" in line
        going_on = dsaws(retaining, "read", name, "--from", str(old), "--from-earliest")
        assert going_on.returncode == 0, going_on.stderr
        assert [json.loads(line) for line in going_on.stdout.splitlines()] == kept
        assert f"going on from {earliest}" in going_on.stderr
