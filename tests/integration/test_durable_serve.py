"""`dsaws serve --data-dir`: what a server acknowledged survives a `kill -9` and a restart.

Writers append without pause until the server is killed under them, three times over, then
each stream is read back after the last restart. A writer has one append in flight at a time,
so its stream must hold exactly its first k messages, in order, where k is at least the number
it saw acknowledged: at most the one append that was in flight when the server died may be
there too (it reached the journal, its answer did not reach the writer). Producer streams then
re-send that last append with the same producer sequence, and must hold it exactly once.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support import ROOT, ServerProcess

BINARY = "application/octet-stream"
# Messages over the server's inline limit (64 KiB) go to S3, which the journal keeps too.
SIZES = {"small": 40, "large": 96 * 1024}


def message(writer: str, number: int, size: int) -> bytes:
    head = f"<{writer}:{number}>".encode()
    return head + b"." * max(0, size - len(head))


@dataclass
class Writer:
    """One stream, appended to by one thread until the server goes away."""

    name: str
    size: int
    producer: bool
    acknowledged: int = 0
    sent: list[bytes] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # answers that were not a success

    def path(self, base: str) -> str:
        return f"{base}/v1/stream/durable/{self.name}"

    def headers(self, seq: int) -> dict[str, str]:
        headers = {"content-type": BINARY}
        if self.producer:
            headers.update(
                {"producer-id": self.name, "producer-epoch": "0", "producer-seq": str(seq)}
            )
        return headers

    def run(self, base: str, stop: threading.Event) -> None:
        with httpx.Client(timeout=10) as client:
            while not stop.is_set():
                number = len(self.sent)
                body = message(self.name, number, self.size)
                self.sent.append(body)  # sent before the answer: it may be stored either way
                try:
                    answer = client.post(
                        self.path(base), content=body, headers=self.headers(number)
                    )
                except httpx.TransportError:
                    return  # the server is gone
                if answer.status_code not in (200, 204):
                    self.refusals.append(f"{answer.status_code} {answer.text}")
                    return
                self.acknowledged = number + 1

    def check(self, stored: bytes) -> int:
        """Exactly the first k messages sent, for some k from the acknowledged count up;
        returns k."""
        held = 0
        at = 0
        while at < len(stored):
            expected = self.sent[held]
            assert stored[at : at + len(expected)] == expected, (
                f"{self.name}: message {held} is not what was sent"
            )
            at += len(expected)
            held += 1
        assert self.acknowledged <= held <= len(self.sent), (
            f"{self.name}: holds {held} messages, {self.acknowledged} were acknowledged, "
            f"{len(self.sent)} sent"
        )
        return held


def read_all(client: httpx.Client, url: str) -> bytes:
    data = b""
    offset = "-1"
    while True:
        answer = client.get(url, params={"offset": offset})
        assert answer.status_code == 200, answer.text
        data += answer.content
        offset = answer.headers["stream-next-offset"]
        if "stream-up-to-date" in answer.headers:
            return data


def run_until_killed(server: ServerProcess, writers: list[Writer], seconds: float) -> None:
    stop = threading.Event()
    threads = [
        threading.Thread(target=writer.run, args=(server.base_url, stop)) for writer in writers
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    server.kill()  # with the writers mid-append
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    refused = {writer.name: writer.refusals for writer in writers if writer.refusals}
    assert not refused, f"appends refused while the server ran: {refused}"


def reconcile(client: httpx.Client, base: str, writers: list[Writer]) -> None:
    """After a restart: every acknowledged append is there; a producer's append that was in
    flight, sent again with its sequence number, is then there exactly once; a plain writer
    carries on from what the stream holds."""
    for writer in writers:
        if writer.producer and writer.sent:
            last = len(writer.sent) - 1
            again = client.post(
                writer.path(base), content=writer.sent[last], headers=writer.headers(last)
            )
            assert again.status_code in (200, 204), again.text
            writer.acknowledged = len(writer.sent)
        held = writer.check(read_all(client, writer.path(base)))
        del writer.sent[held:]
        writer.acknowledged = held


def test_a_killed_server_loses_nothing_it_acknowledged(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "data")
    tag = uuid.uuid4().hex[:8]
    writers = [
        Writer(f"{kind}-{size_name}-{tag}", size, kind == "producer")
        for kind in ("plain", "producer")
        for size_name, size in SIZES.items()
    ]
    with ServerProcess("--data-dir", data_dir) as server, httpx.Client() as client:
        for writer in writers:
            created = client.put(writer.path(server.base_url), headers={"content-type": BINARY})
            assert created.status_code == 201
        run_until_killed(server, writers, seconds=1.5)
    acknowledged = [writer.acknowledged for writer in writers]
    assert all(acknowledged), f"some writer never got an append in: {acknowledged}"

    for _ in range(2):  # restarted from the journal, checked, written to, and killed again
        with ServerProcess("--data-dir", data_dir) as server, httpx.Client(timeout=30) as client:
            reconcile(client, server.base_url, writers)
            run_until_killed(server, writers, seconds=1.0)

    with ServerProcess("--data-dir", data_dir) as server, httpx.Client(timeout=30) as client:
        reconcile(client, server.base_url, writers)
        totals = {writer.name: writer.acknowledged for writer in writers}
        grew = zip(totals.values(), acknowledged, strict=True)
        assert all(total > first for total, first in grew), totals


def test_serve_refuses_a_data_dir_it_cannot_use_with_one_line(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("kept")
    for args, status in [
        (["--data-dir", str(a_file)], 3),
        (["--data-dir", str(tmp_path), "--in-memory"], 2),  # one or the other
        (["--aws", "--data-dir", str(tmp_path)], 2),  # the emulator's, not AWS's
    ]:
        run = subprocess.run(
            [sys.executable, "-m", "durable_streams_aws.core.cli", "serve", "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert run.returncode == status, run.stderr
        assert "Traceback" not in run.stderr and run.stderr.strip(), run.stderr
    assert a_file.read_text() == "kept"
