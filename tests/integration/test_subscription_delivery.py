"""Webhook delivery across two server instances on one store, to a receiver that fails, times
out, answers slowly and acks too late: every appended byte is delivered at least once and
acknowledged exactly once, and a worker whose lease expired cannot acknowledge."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from support import ServerProcess

from durable_streams_aws.core.protocol.offsets import parse_position
from durable_streams_aws.core.subscriptions._signing import verify_signature
from durable_streams_aws.infra.emulator import Emulator

LEASE_MS = 1000
# What the receiver does with each wake it is sent, in turn (then "ack" for ever after):
#   fail     answer 500 (the server retries with backoff)
#   timeout  answer after the server's timeout (min(lease, 10 s)): a failure too
#   slow     answer 200 after half a lease, then ack by callback
#   late     answer 200, then ack after the lease has expired: must be refused (409)
#   ack      answer 200 at once, then ack by callback
SCRIPT = ["fail", "ack", "timeout", "slow", "late", "fail", "fail", "ack", "late", "slow"]


@dataclass
class Receiver:
    """A webhook receiver playing SCRIPT, recording what it was sent and what its acks got."""

    jwks: dict[str, Any] = field(default_factory=dict)
    wakes: list[dict[str, Any]] = field(default_factory=list)
    acked: list[tuple[str, int, int]] = field(default_factory=list)  # (path, from, to) on 200
    refused: list[int] = field(default_factory=list)  # statuses of refused acks
    bad_signatures: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    behaviours: Iterator[str] = field(
        default_factory=lambda: itertools.chain(SCRIPT, itertools.repeat("ack"))
    )

    def next_behaviour(self) -> str:
        with self.lock:
            return next(self.behaviours)

    def ack(self, wake: dict[str, Any], headers: dict[str, str]) -> None:
        pending = [s for s in wake["streams"] if s["has_pending"]]
        body = {
            "wake_id": wake["wake_id"],
            "generation": wake["generation"],
            "acks": [{"stream": s["path"], "offset": s["tail_offset"]} for s in pending],
            "done": True,
        }
        authorization = {"Authorization": f"Bearer {wake['callback_token']}"}
        answer = httpx.post(wake["callback_url"], json=body, headers={**headers, **authorization})
        with self.lock:
            if answer.status_code == 200:
                for s in pending:
                    span = (parse_position(s["acked_offset"]), parse_position(s["tail_offset"]))
                    self.acked.append((s["path"], *span))
            else:
                self.refused.append(answer.status_code)


def _serve_receiver(receiver: Receiver) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            if not verify_signature(
                self.headers["Webhook-Signature"], raw, receiver.jwks, now=time.time()
            ):
                receiver.bad_signatures += 1
            wake = json.loads(raw)
            behaviour = receiver.next_behaviour()
            with receiver.lock:
                receiver.wakes.append({**wake, "behaviour": behaviour})
            if behaviour == "fail":
                self._answer(500)
                return
            if behaviour == "timeout":
                time.sleep(LEASE_MS / 1000 + 0.5)
            elif behaviour == "slow":
                time.sleep(LEASE_MS / 2000)
            self._answer(200)
            if behaviour == "timeout":
                return  # the server gave up on this answer: it will deliver again
            delay = LEASE_MS / 1000 + 0.6 if behaviour == "late" else 0.0
            threading.Timer(delay, receiver.ack, (wake, {})).start()

        def _answer(self, status: int) -> None:
            body = b"{}"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the server timed out and hung up
                self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def two_servers(emulator: Emulator) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two `dsaws serve` processes on one table and bucket (as two Lambda instances are), with
    the same webhook secret (as both read it from Secrets Manager)."""
    name = f"subs-{uuid.uuid4().hex[:8]}"
    env = {
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "DS_WEBHOOK_SECRET": "a shared test secret of the two instances",
        "DS_SEAL_INTERVAL": "0",
    }
    args = ("--aws", "--table", name, "--bucket", name, "--long-poll-timeout", "1")
    with ServerProcess(*args, env=env) as first, ServerProcess(*args, env=env) as second:
        yield first, second


def _stream(server: ServerProcess, path: str) -> str:
    return f"{server.base_url}/v1/stream/{path}"


def test_every_byte_is_delivered_and_acknowledged_exactly_once(
    two_servers: tuple[ServerProcess, ServerProcess],
) -> None:
    first, second = two_servers
    receiver = Receiver()
    hook = _serve_receiver(receiver)
    try:
        url = f"http://127.0.0.1:{hook.server_address[1]}/hook"
        subscription = f"{first.base_url}/v1/stream/__ds/subscriptions/delivery"
        created = httpx.put(
            subscription,
            json={
                "type": "webhook",
                "pattern": "jobs/*",
                "webhook": {"url": url},
                "lease_ttl_ms": LEASE_MS,
            },
        )
        assert created.status_code == 201, created.text
        receiver.jwks = httpx.get(created.json()["webhook"]["signing"]["jwks_url"]).json()

        # Appends through both instances, to three streams, while wakes come and go.
        paths = [f"jobs/{name}" for name in ("a", "b", "c")]
        tails = {}
        for index, path in enumerate(paths):
            server = (first, second)[index % 2]
            response = httpx.put(
                _stream(server, path), content=b"start;", headers={"Content-Type": "text/plain"}
            )
            assert response.status_code == 201
        # At least 12 rounds, and on until the receiver has played its whole script: how many
        # wakes a round brings depends on the machine's pace.
        script_deadline = time.monotonic() + 60
        for round_ in itertools.count():
            played = len(receiver.wakes) >= len(SCRIPT)
            if round_ >= 12 and (played or time.monotonic() > script_deadline):
                break
            for index, path in enumerate(paths):
                server = (first, second)[(round_ + index) % 2]
                response = httpx.post(
                    _stream(server, path),
                    content=f"m{round_};".encode(),
                    headers={"Content-Type": "text/plain"},
                )
                assert response.status_code == 204
            time.sleep(0.25)
        for path in paths:
            tails[path] = int(
                httpx.head(_stream(first, path)).headers["Stream-Next-Offset"].split("_")[1]
            )

        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            state = httpx.get(subscription).json()
            acked = {s["path"]: parse_position(s["acked_offset"]) for s in state["streams"]}
            if all(acked.get(path) == tails[path] for path in paths):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"not everything was acknowledged: {acked} of {tails}")
        time.sleep(LEASE_MS / 1000 + 1)  # let any late ack still in flight arrive
    finally:
        hook.shutdown()

    behaviours = [wake["behaviour"] for wake in receiver.wakes]
    print(f"\n{len(receiver.wakes)} wakes: {behaviours}; refused acks: {receiver.refused}")
    assert receiver.bad_signatures == 0
    # Every behaviour was met, and the server came back after each failure.
    assert set(SCRIPT) <= set(behaviours)
    for path in paths:
        # Acknowledged exactly once: the successful acks tile [0, tail) without overlap.
        spans = sorted((start, end) for p, start, end in receiver.acked if p == path)
        position = 0
        for start, end in spans:
            assert start == position, f"{path}: ack of [{start}, {end}) after {position}"
            position = end
        assert position == tails[path], f"{path}: acks end at {position} of {tails[path]}"
        # Delivered at least once: every byte fell inside some wake's announced range.
        delivered = sorted(
            (parse_position(s["acked_offset"]), parse_position(s["tail_offset"]))
            for wake in receiver.wakes
            for s in wake["streams"]
            if s["path"] == path and s["has_pending"]
        )
        covered = 0
        for start, end in delivered:
            assert start <= covered, f"{path}: bytes [{covered}, {start}) never delivered"
            covered = max(covered, end)
        assert covered == tails[path]
    # A worker whose lease had expired could not acknowledge: each late ack was fenced.
    late = behaviours.count("late")
    assert late >= 2 and receiver.refused.count(409) >= late
    assert set(receiver.refused) == {409}
