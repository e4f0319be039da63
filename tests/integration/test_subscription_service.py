"""The subscription service against the emulator, as two instances on one store: linking,
backfill, wakes, fencing and claims, with the delivery tasks run by hand."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from support import FakeClock, store_on

from durable_streams_aws.core.http.subscription_requests import bearer_token
from durable_streams_aws.core.http.subscriptions import complete_wake
from durable_streams_aws.core.protocol.append import AppendIntent
from durable_streams_aws.core.protocol.offsets import format_offset
from durable_streams_aws.core.runtime import Backend
from durable_streams_aws.core.storage import CreateSpec, DynamoStore, Payload, StoreUnavailable
from durable_streams_aws.core.storage.aws import Conflict
from durable_streams_aws.core.subscriptions import (
    Creation,
    Keys,
    Sent,
    SubscriptionError,
    Subscriptions,
    Task,
    TaskKind,
    parse_config,
    stream_report,
)
from durable_streams_aws.core.subscriptions._linking import LINK_WRITERS_GRACE
from durable_streams_aws.core.subscriptions._signing import SigningKey
from durable_streams_aws.core.subscriptions._tokens import TokenSigner, derive_token_key
from durable_streams_aws.core.subscriptions.store import LINK_PREFIX, SubscriptionStore
from durable_streams_aws.core.subscriptions.wiring import StreamAccess
from durable_streams_aws.core.telemetry import Metric

ROOT = "http://test.local/v1/stream/"
SIGNING = SigningKey.from_secret_text("shared by both instances")
KEYS = Keys(SIGNING, TokenSigner(derive_token_key(SIGNING.seed)))

pytestmark = pytest.mark.both_dynamodbs


class Tasks:
    """A scheduler that keeps tasks for the test to run when the fake clock says so."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.sent: list[tuple[Task, float]] = []  # (task, delay)
        self._due: list[tuple[Task, float]] = []  # (task, time due)

    def send(self, task: Task, delay: float = 0.0) -> None:
        self.sent.append((task, delay))
        self._due.append((task, self.clock.now + delay))

    def take(self) -> list[Task]:
        """The tasks due now, removed."""
        due = [task for task, at in self._due if at <= self.clock.now]
        self._due = [(task, at) for task, at in self._due if at > self.clock.now]
        self.sent = [(task, delay) for task, delay in self.sent if task not in due]
        return due

    @property
    def pending_now(self) -> bool:
        return any(at <= self.clock.now for _, at in self._due)


class Hook:
    """The webhook: records bodies; answers with `answer`."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.answer = Sent(True)

    def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> Sent:
        self.bodies.append(json.loads(body))
        return self.answer


class Figures:
    """Telemetry that keeps what it is told, by metric."""

    def __init__(self) -> None:
        self.values: dict[Metric, list[float]] = {}

    def count(self, metric: Metric, value: float = 1) -> None:
        self.values.setdefault(metric, []).append(value)

    def count_by(self, metric: Metric, dimensions: Mapping[str, str], value: float = 1) -> None:
        self.count(metric, value)


def instance(
    backend: Backend, clock: FakeClock, hook: Hook, telemetry: Figures | None = None
) -> tuple[Subscriptions, Tasks]:
    store = store_on(backend, clock=clock)
    tasks = Tasks(clock)
    service = Subscriptions(
        SubscriptionStore(store.dynamodb, store.table),
        StreamAccess(store),
        lambda: KEYS,
        tasks,
        hook,
        clock=clock,
        telemetry=telemetry,
    )
    return service, tasks


def create_stream(store: DynamoStore, path: str, data: bytes = b"") -> None:
    store.create(path, CreateSpec("text/plain", None, None, False, Payload(data)))


def append(store: DynamoStore, path: str, data: bytes) -> None:
    outcome = store.append(path, AppendIntent("text/plain", True, False), Payload(data))
    assert outcome.decision is not None and outcome.decision.commits


def webhook(pattern: str | None = "jobs/*", **extra: Any) -> Any:
    document = {"type": "webhook", "webhook": {"url": "https://hooks.example/x"}, **extra}
    if pattern is not None:
        document["pattern"] = pattern
    return parse_config(json.dumps(document).encode(), allow_local_http=False)


def pull(pattern: str = "jobs/*") -> Any:
    document = {"type": "pull-wake", "pattern": pattern, "wake_stream": "wake/pool"}
    return parse_config(json.dumps(document).encode(), allow_local_http=False)


def ack_body(wake: dict[str, Any], path: str, position: int) -> bytes:
    acks = [{"stream": path, "offset": format_offset(position)}]
    document = {"wake_id": wake["wake_id"], "generation": wake["generation"], "acks": acks}
    return json.dumps({**document, "done": True}).encode()


def complete(service: Subscriptions, sid: str, authorization: str, body: bytes) -> bool:
    """A callback, as its route makes it: the token from the header, the body as sent."""
    return complete_wake(service, sid, bearer_token(authorization), body)


def run_all(*queues: tuple[Subscriptions, Tasks]) -> None:
    """Run every task due, on the instance that queued it, until none are left."""
    while any(tasks.pending_now for _, tasks in queues):
        for service, tasks in queues:
            service.run(tasks.take())


@pytest.fixture
def clock() -> FakeClock:
    import time

    return FakeClock(time.time())


def acked(service: Subscriptions, sid: str) -> dict[str, str]:
    _, statuses = service.describe(sid)
    return {s.link.path: format_offset(s.acked) for s in statuses}


def test_create_confirms_identical_configs_refuses_others_and_backfills_at_tails(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    one, _ = instance(backend, clock, hook)
    two, _ = instance(backend, clock, hook)
    create_stream(backend.store, "jobs/old", b"history")
    create_stream(backend.store, "other/x", b"unrelated")
    status, _ = one.create("s", webhook(streams=["manual/a"]), ROOT)
    assert status is Creation.CREATED
    assert two.create("s", webhook(streams=["manual/a"]), ROOT)[0] is Creation.CONFIRMED
    with pytest.raises(SubscriptionError) as refused:
        two.create("s", webhook(pattern="jobs/**"), ROOT)
    assert refused.value.status == 409 and refused.value.code == "SUBSCRIPTION_ALREADY_EXISTS"
    # Existing matches start at their tails (no history replayed); the explicit stream that
    # does not exist yet starts at zero; unrelated streams are not linked.
    assert acked(two, "s") == {"jobs/old": format_offset(7), "manual/a": format_offset(0)}


def test_an_append_on_either_instance_wakes_once_and_a_stale_ack_is_fenced(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    one = instance(backend, clock, hook)
    two = instance(backend, clock, hook)
    one[0].create("s", webhook(lease_ttl_ms=5000), ROOT)
    run_all(one, two)  # the creation's check: nothing pending
    assert hook.bodies == []

    create_stream(backend.store, "jobs/new", b"abc")  # created after the subscription
    two[0].changed("jobs/new")
    one[0].changed("jobs/new")  # both instances notice; one wake is issued
    run_all(one, two)
    assert len(hook.bodies) == 1
    wake = hook.bodies[0]
    assert wake["streams"] == [
        {
            "path": "jobs/new",
            "link_type": "glob",
            "acked_offset": format_offset(0),  # found by an append: linked from the beginning
            "tail_offset": format_offset(3),
            "has_pending": True,
        }
    ]

    authorization = f"Bearer {wake['callback_token']}"
    body = ack_body(wake, "jobs/new", 3)
    # The lease ran out before the worker acked: refused, even before the expiry ran.
    clock.now += 5
    with pytest.raises(SubscriptionError) as late:
        complete(two[0], "s", authorization, body)
    assert late.value.code == "FENCED"
    run_all(one, two)  # the expiry: a new generation for the same pending bytes
    assert len(hook.bodies) == 2 and hook.bodies[1]["generation"] == wake["generation"] + 1
    assert hook.bodies[1]["streams"][0]["acked_offset"] == format_offset(0)

    fresh = hook.bodies[1]
    fresh_body = ack_body(fresh, "jobs/new", 3)
    with pytest.raises(SubscriptionError) as wrong_token:  # the old wake's token
        complete(one[0], "s", authorization, fresh_body)
    assert wrong_token.value.code == "FENCED"
    assert complete(one[0], "s", f"Bearer {fresh['callback_token']}", fresh_body) is False
    assert acked(two[0], "s") == {"jobs/new": format_offset(3)}
    with pytest.raises(SubscriptionError) as again:  # the same ack twice: fenced
        complete(two[0], "s", f"Bearer {fresh['callback_token']}", fresh_body)
    assert again.value.code == "FENCED"
    with pytest.raises(SubscriptionError) as forged:
        complete(two[0], "s", "Bearer not-a-token", fresh_body)
    assert forged.value.status == 401


def test_a_recreated_stream_is_pending_from_its_new_beginning(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    hook.answer = Sent(True, done=True)
    one = instance(backend, clock, hook)
    create_stream(backend.store, "jobs/r", b"0123456789")
    one[0].create("s", webhook(), ROOT)
    backend.store.delete("jobs/r")
    create_stream(backend.store, "jobs/r", b"new")  # shorter than the old ack
    one[0].changed("jobs/r")
    run_all(one)
    assert [w["streams"][0]["acked_offset"] for w in hook.bodies] == [format_offset(0)]
    assert acked(one[0], "s") == {"jobs/r": format_offset(3)}  # done: the snapshot acked


def test_deliveries_failures_retries_and_pending_wakes_are_counted(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    hook.answer = Sent(False, detail="status 500")
    figures = Figures()
    service, tasks = instance(backend, clock, hook, figures)
    service.create("s", webhook(lease_ttl_ms=60_000), ROOT)
    tasks.take()
    create_stream(backend.store, "jobs/m", b"x")
    service.notice(["jobs/m"])
    service.run(tasks.take())  # the first delivery fails, and its retry is scheduled
    assert figures.values[Metric.WEBHOOK_FAILURES] == [1]
    assert figures.values[Metric.WEBHOOK_RETRIES] == [1]
    clock.now += 0.5
    service.sweep()  # the wake is still out, issued half a second ago
    assert figures.values[Metric.PENDING_WAKES] == [1]
    assert figures.values[Metric.OLDEST_PENDING_WAKE_AGE] == [pytest.approx(0.5, abs=0.05)]
    hook.answer = Sent(True)
    clock.now += 5
    run_all((service, tasks))
    assert figures.values[Metric.WEBHOOK_DELIVERIES] == [1]
    assert figures.values[Metric.WEBHOOK_FAILURES] == [1]  # the success counted apart


def test_failed_deliveries_back_off_and_mark_the_subscription_failed(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    hook.answer = Sent(False, detail="status 500")
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(lease_ttl_ms=1000), ROOT)
    tasks.take()
    create_stream(backend.store, "jobs/f", b"x")
    service.notice(["jobs/f"])
    delays = []
    for _ in range(4):
        deliveries = [(t, d) for t, d in tasks.sent if t.kind is TaskKind.DELIVER]
        tasks.sent.clear()
        task, delay = deliveries[-1]
        delays.append(delay)
        clock.now += delay
        service.run([task])
    assert delays[0] == 0 and 0.8 <= delays[1] <= 1.2 and 1.6 <= delays[2] <= 2.4
    assert 3.2 <= delays[3] <= 4.8
    assert len(hook.bodies) == 4 and len({b["generation"] for b in hook.bodies}) == 1
    subscription, _ = service.describe("s")
    assert subscription.status == "failed" and subscription.failed_attempts == 4
    hook.answer = Sent(True)
    retry = [t for t, _ in tasks.sent if t.kind is TaskKind.DELIVER][-1]
    clock.now += 60
    service.run([retry])
    assert service.describe("s")[0].status == "active"


def test_a_callback_clears_the_failure_of_a_post_that_timed_out(
    backend: Backend, clock: FakeClock
) -> None:
    """The receiver got the wake but answered too late: its callback proves the delivery, so
    the subscription no longer reads "failed"."""
    hook = Hook()
    hook.answer = Sent(False, detail="timed out")
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(lease_ttl_ms=30_000), ROOT)
    create_stream(backend.store, "jobs/f", b"abc")
    service.notice(["jobs/f"])
    service.run(tasks.take())
    assert service.describe("s")[0].status == "failed"
    wake = hook.bodies[0]
    complete(service, "s", f"Bearer {wake['callback_token']}", ack_body(wake, "jobs/f", 3))
    subscription, _ = service.describe("s")
    assert subscription.status == "active" and subscription.next_attempt_at == 0.0
    assert acked(service, "s") == {"jobs/f": format_offset(3)}


def test_a_failed_delivery_is_retried_though_the_subscription_changed_during_its_post(
    backend: Backend, clock: FakeClock
) -> None:
    """Streams are added while the POST is out, and the POST then fails: the wake is still
    current, so its retry is scheduled (it was dropped as if a callback had come first)."""
    service: Subscriptions

    class ChangingHook(Hook):
        def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> Sent:
            super().__call__(url, body, headers, timeout)
            if len(self.bodies) == 1:
                service.add_streams("s", ("extra/x",))
                return Sent(False, detail="timeout")
            return Sent(True, done=True)

    hook = ChangingHook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(lease_ttl_ms=30_000), ROOT)
    create_stream(backend.store, "jobs/f", b"x")
    service.notice(["jobs/f"])
    for _ in range(10):  # ten seconds, a task run every one
        service.run(tasks.take())
        clock.now += 1
    assert len(hook.bodies) == 2 and hook.bodies[0]["wake_id"] == hook.bodies[1]["wake_id"]
    assert acked(service, "s")["jobs/f"] == format_offset(1)


def test_a_failure_after_a_heartbeat_leaves_the_wake_to_the_worker(
    backend: Backend, clock: FakeClock
) -> None:
    """The receiver's worker called back (a heartbeat) before the POST's answer was lost: the
    wake is in hand, so it is neither marked failed nor sent again."""
    service: Subscriptions

    class HeartbeatHook(Hook):
        def __call__(self, url: str, body: bytes, headers: dict[str, str], timeout: float) -> Sent:
            wake = json.loads(body)
            super().__call__(url, body, headers, timeout)
            document = {"wake_id": wake["wake_id"], "generation": wake["generation"]}
            heartbeat = json.dumps({**document, "acks": []}).encode()
            clock.now += 0.5  # the worker calls back while the answer is on its way
            complete(service, "s", f"Bearer {wake['callback_token']}", heartbeat)
            return Sent(False, detail="timeout")

    hook = HeartbeatHook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(lease_ttl_ms=30_000), ROOT)
    create_stream(backend.store, "jobs/f", b"x")
    service.notice(["jobs/f"])
    for _ in range(10):
        service.run(tasks.take())
        clock.now += 1
    assert len(hook.bodies) == 1
    assert service.describe("s")[0].status == "active"


def test_only_one_of_two_instances_claims_a_pull_wake(backend: Backend, clock: FakeClock) -> None:
    hook = Hook()
    one = instance(backend, clock, hook)
    two = instance(backend, clock, hook)
    backend.store.create("wake/pool", CreateSpec("application/json", None, None, False, Payload()))
    one[0].create("p", pull(), ROOT)
    with pytest.raises(SubscriptionError) as nothing:
        one[0].claim("p", "w1")
    assert nothing.value.code == "NO_PENDING_WORK"
    create_stream(backend.store, "jobs/p", b"work")
    one[0].changed("jobs/p")
    run_all(one, two)
    events = backend.store.read(backend.store.get("wake/pool"), 0, 1 << 20)
    assert [json.loads(m)["subscription_id"] for m in events.messages or ()] == ["p"]

    results: list[Any] = []

    def claim(service: Subscriptions, worker: str) -> None:
        try:
            results.append(service.claim("p", worker))
        except SubscriptionError as error:
            results.append(error)

    threads = [
        threading.Thread(target=claim, args=(service, f"w{i}"))
        for i, (service, _) in enumerate((one, two, one, two))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [r for r in results if not isinstance(r, SubscriptionError)]
    lost = [r for r in results if isinstance(r, SubscriptionError)]
    assert len(won) == 1 and len(lost) == 3
    assert {error.code for error in lost} == {"ALREADY_CLAIMED"}
    holder = won[0].subscription.wake.holder
    assert all(error.extra["current_holder"] == holder for error in lost)


def test_a_listing_pages_past_subscription_items(backend: Backend, clock: FakeClock) -> None:
    """A listing's scan page may end on a subscription or link item: its cursor must be
    accepted on the next page."""
    hook = Hook()
    service, _ = instance(backend, clock, hook)
    for index in range(6):
        create_stream(backend.store, f"jobs/{index}", b"x")
    for index in range(4):
        service.create(f"s{index}", webhook(), ROOT)
    seen, cursor = [], None
    for _ in range(200):
        page = backend.store.list_streams("", cursor, 1)
        seen.extend(page.paths)
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(seen) == [f"jobs/{index}" for index in range(6)]


def test_the_webhook_sender_posts_to_the_checked_address_under_the_hooks_name() -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from durable_streams_aws.core.subscriptions.webhooks import WebhookSender

    seen: list[tuple[str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.headers["Host"], body))
            answer = b'{"done": true}' if body == b"finish" else b"{}"
            self.send_response(200 if body != b"fail" else 503)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        local = WebhookSender(allow_local_http=True)
        url = f"http://localhost:{port}/hook"
        assert local(url, b"finish", {}, 2.0) == Sent(True, done=True)
        assert local(url, b"later", {}, 2.0) == Sent(True, done=False)
        assert not local(url, b"fail", {}, 2.0).ok
        # The name went in the Host header; the connection went to the address checked.
        assert [host for host, _ in seen] == [f"localhost:{port}"] * 3
        # Without the development exception, a name resolving to loopback is never sent to.
        refused = WebhookSender(allow_local_http=False)(url, b"x", {}, 2.0)
        assert not refused.ok and "refused address" in refused.detail
        assert len(seen) == 3
    finally:
        server.shutdown()


def test_a_restarted_process_wakes_what_its_lost_notices_would_have(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    crashed, lost = instance(backend, clock, hook)  # its tasks are never run
    crashed.create("s", webhook(), ROOT)
    create_stream(backend.store, "jobs/during", b"data")
    crashed.changed("jobs/during")
    del lost  # the process died with its queued notice and its creation's check
    restarted = instance(backend, clock, hook)
    restarted[0].resume()
    run_all(restarted)
    assert [b["streams"][0]["path"] for b in hook.bodies] == ["jobs/during"]
    assert hook.bodies[0]["streams"][0]["acked_offset"] == format_offset(0)


def test_explicit_and_pattern_links_come_and_go_independently(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    service, _ = instance(backend, clock, hook)
    service.create("s", webhook(streams=["jobs/both", "solo/x"]), ROOT)
    create_stream(backend.store, "jobs/both", b"1")
    service.notice(["jobs/both"])
    kinds = {s.link.path: s.link.link_type.value for s in service.describe("s")[1]}
    assert kinds == {"jobs/both": "explicit", "solo/x": "explicit"}
    service.remove_stream("s", "jobs/both")  # the pattern still names it: it stays, as glob
    service.remove_stream("s", "solo/x")  # nothing else names it: it goes
    service.remove_stream("s", "solo/x")  # idempotent
    kinds = {s.link.path: s.link.link_type.value for s in service.describe("s")[1]}
    assert kinds == {"jobs/both": "glob"}
    service.add_streams("s", ("solo/x",))
    service.add_streams("s", ("solo/x",))
    kinds = {s.link.path: s.link.link_type.value for s in service.describe("s")[1]}
    assert kinds == {"jobs/both": "glob", "solo/x": "explicit"}


def test_an_append_while_a_wake_is_in_flight_is_woken_after_its_done(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    one = instance(backend, clock, hook)
    two = instance(backend, clock, hook)
    one[0].create("s", webhook(lease_ttl_ms=5000), ROOT)
    create_stream(backend.store, "jobs/x", b"abc")
    one[0].changed("jobs/x")
    run_all(one, two)
    wake = hook.bodies[-1]
    # More data while the wake is out: its notice finds the subscription busy.
    append(backend.store, "jobs/x", b"def")
    two[0].changed("jobs/x")
    run_all(one, two)
    assert len(hook.bodies) == 1
    done = complete(one[0], "s", f"Bearer {wake['callback_token']}", ack_body(wake, "jobs/x", 3))
    assert done is True  # next_wake: the done looked again and found [3, 6)
    run_all(one, two)
    assert len(hook.bodies) == 2
    assert hook.bodies[1]["streams"][0]["acked_offset"] == format_offset(3)
    assert hook.bodies[1]["streams"][0]["tail_offset"] == format_offset(6)


def test_the_sweep_wakes_pending_work_whose_notice_was_lost(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(streams=["jobs/x"]), ROOT)
    create_stream(backend.store, "jobs/x", b"abc")
    run_all((service, tasks))
    assert hook.bodies == []  # nobody told the subscriptions about the write
    service.sweep()
    run_all((service, tasks))
    assert [b["streams"][0]["path"] for b in hook.bodies] == ["jobs/x"]


def test_an_append_is_judged_unconcerning_only_from_a_fresh_list_that_names_nothing(
    backend: Backend, clock: FakeClock
) -> None:
    """`unconcerned` lets the append path skip `changed` (and its worker thread): it must
    never say so for a path a subscription could name, nor from a list not yet read."""
    service, _ = instance(backend, clock, Hook())
    assert not service.unconcerned("jobs/x")  # the list was never read
    service.changed("other/y")  # reads it: no subscriptions
    assert service.unconcerned("jobs/x")
    service.create("p", pull(), ROOT)  # a new subscription makes the list stale
    assert not service.unconcerned("jobs/x")
    service.changed("other/y")
    assert not service.unconcerned("jobs/x")  # named by the subscription
    assert service.unconcerned("other/y")


def test_an_unclaimed_pull_wake_is_announced_again_once_its_stream_exists(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    service.create("p", pull(), ROOT)
    create_stream(backend.store, "jobs/x", b"abc")
    service.changed("jobs/x")
    run_all((service, tasks))  # the wake event had nowhere to go: no wake stream yet
    backend.store.create("wake/pool", CreateSpec("application/json", None, None, False, Payload()))
    clock.now += 31  # the default lease: nobody claimed the wake
    run_all((service, tasks))
    events = backend.store.read(backend.store.get("wake/pool"), 0, 1 << 20)
    announced = [json.loads(m) for m in events.messages or ()]
    assert [e["subscription_id"] for e in announced] == ["p"]
    assert announced[0]["generation"] == 2  # a new generation, not the lost one


def test_a_callback_for_streams_gone_meanwhile_acks_nothing_of_their_successors(
    backend: Backend, clock: FakeClock
) -> None:
    """While a wake is out, one of its streams is deleted and created again (on the other
    instance), another deleted, a third unlinked. The worker acks all it was told, with done:
    the acks of the gone streams are dropped, the kept stream's applies, and the new
    incarnation's bytes stay pending for the next wake."""
    hook = Hook()
    one = instance(backend, clock, hook)
    two = instance(backend, clock, hook)
    one[0].create("s", webhook(streams=["solo/x"]), ROOT)
    for path in ("jobs/again", "jobs/gone", "jobs/kept", "solo/x"):
        create_stream(backend.store, path, b"0123456789")
        one[0].changed(path)
    run_all(one, two)
    (wake,) = hook.bodies
    assert {s["path"] for s in wake["streams"]} == {
        "jobs/again",
        "jobs/gone",
        "jobs/kept",
        "solo/x",
    }
    backend.store.delete("jobs/again")
    create_stream(backend.store, "jobs/again", b"NEW-BYTES-OF-THE-NEW-ONE")
    backend.store.delete("jobs/gone")
    two[0].remove_stream("s", "solo/x")

    acks = [{"stream": s["path"], "offset": s["tail_offset"]} for s in wake["streams"]]
    document = {"wake_id": wake["wake_id"], "generation": wake["generation"], "acks": acks}
    body = json.dumps({**document, "done": True}).encode()
    assert complete(two[0], "s", f"Bearer {wake['callback_token']}", body) is True  # more
    positions = acked(one[0], "s")
    assert positions["jobs/kept"] == format_offset(10)
    assert positions["jobs/again"] == format_offset(0)  # the new incarnation: nothing acked
    run_all(one, two)
    again = hook.bodies[-1]["streams"]
    assert [(s["path"], s["acked_offset"], s["tail_offset"]) for s in again] == [
        ("jobs/again", format_offset(0), format_offset(24))
    ]


def test_a_removal_whose_link_cleanup_failed_is_answered_and_cleaned_up_by_the_sweep(
    backend: Backend, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = Hook()
    service, _ = instance(backend, clock, hook)
    for path in ("jobs/a", "jobs/b"):
        create_stream(backend.store, path, b"x")
    service.create("s", webhook(), ROOT)

    def link_items() -> int:
        scan = backend.dynamodb.scan(TableName=backend.settings.table, ConsistentRead=True)
        return sum(item["pk"]["S"].startswith(LINK_PREFIX) for item in scan["Items"])

    assert link_items() == 2

    def busy(subscription: Any) -> None:
        raise StoreUnavailable("throttled", retry_after=1)

    with monkeypatch.context() as patched:
        patched.setattr(service.store, "drop_links", busy)
        service.remove("s")  # taken effect: no error for the client to retry into a 404
    assert link_items() == 2
    service.sweep()
    assert link_items() == 0
    (tombstone,) = service.store.all()
    assert tombstone.deleted and not tombstone.links_dropped
    # A backfill that read the subscription before its removal links one more stream: the
    # sweeps drop links again until no such writer can be left, then record it for good.
    service.store.link(tombstone, "jobs/a", glob=True, explicit=False, at=None)
    clock.now += LINK_WRITERS_GRACE + 1
    service.sweep()
    assert link_items() == 0
    (tombstone,) = service.store.all()
    assert tombstone.links_dropped


def test_a_done_for_a_link_removed_meanwhile_ends_the_wake(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(pattern=None, streams=["solo/x"]), ROOT)
    create_stream(backend.store, "solo/x", b"abc")
    service.changed("solo/x")
    run_all((service, tasks))
    subscription, _ = service.describe("s")
    wake = subscription.wake
    assert wake is not None
    service.remove_stream("s", "solo/x")
    service.delivery.ack_snapshot(service.describe("s")[0], wake)  # what {"done": true} does
    after, links = service.describe("s")
    assert after.wake is None and links == ()


@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_trickling_webhook_answer_is_cut_off_at_the_delivery_timeout(part: str) -> None:
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from durable_streams_aws.core.subscriptions.webhooks import WebhookSender

    class Trickle(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
            if part == "body":
                self.wfile.write(head)
            trickled = head + b" " * 1000 if part == "headers" else b" " * 1000
            try:
                for byte in trickled:  # a byte every 0.2 s: each read is quick enough
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                return  # the server hung up, as it should

    server = ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        sent = WebhookSender(allow_local_http=True)(
            f"http://127.0.0.1:{server.server_address[1]}/", b"{}", {}, 1.0
        )
        assert not sent.ok and "TimeoutError" in sent.detail
        assert time.monotonic() - started < 2.5
    finally:
        server.shutdown()


def test_a_creation_cut_short_is_finished_by_the_confirming_put(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    service, _ = instance(backend, clock, hook)
    create_stream(backend.store, "jobs/old", b"history")
    broken = service.store.link

    def throttled(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailable("throttled")

    service.store.link = throttled  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        service.create("s", webhook(), ROOT)
    service.store.link = broken  # type: ignore[method-assign]
    assert service.create("s", webhook(), ROOT)[0] is Creation.CONFIRMED
    # Linked at its tail, as a creation does: its history is not delivered.
    assert acked(service, "s") == {"jobs/old": format_offset(7)}
    assert service.describe("s")[0].backfilled


def test_a_cursor_never_moves_back(backend: Backend, clock: FakeClock) -> None:
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(lease_ttl_ms=5000), ROOT)
    create_stream(backend.store, "jobs/x", b"abc")
    service.changed("jobs/x")
    run_all((service, tasks))
    wake = hook.bodies[-1]
    append(backend.store, "jobs/x", b"defgh")
    # A heartbeat acks past the wake's snapshot (the worker read on): allowed.
    heartbeat = json.loads(ack_body(wake, "jobs/x", 8))
    heartbeat["done"] = False
    token = f"Bearer {wake['callback_token']}"
    assert complete(service, "s", token, json.dumps(heartbeat).encode()) is False
    # Then the webhook's {"done": true} acks the snapshot (3): the cursor stays at 8.
    subscription = service.describe("s")[0]
    assert subscription.wake is not None
    service.delivery.ack_snapshot(subscription, subscription.wake)
    assert acked(service, "s") == {"jobs/x": format_offset(8)}


def test_heartbeats_leave_one_lease_timer(backend: Backend, clock: FakeClock) -> None:
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(lease_ttl_ms=2000), ROOT)
    create_stream(backend.store, "jobs/x", b"abc")
    service.changed("jobs/x")
    run_all((service, tasks))
    wake = hook.bodies[-1]
    beat = json.dumps({"wake_id": wake["wake_id"], "generation": wake["generation"]}).encode()
    for _ in range(20):
        clock.now += 1
        complete(service, "s", f"Bearer {wake['callback_token']}", beat)
        run_all((service, tasks))
    clock.now += 1.5  # the timer of the lease before the last fires, and ends
    run_all((service, tasks))
    timers = [task for task, _ in tasks.sent if task.kind is TaskKind.EXPIRE]
    lease = service.describe("s")[0].wake
    assert lease is not None
    # Each superseded timer ended when it fired; one is left, for the current lease.
    assert [task.lease_end for task in timers] == [lease.lease_expires_at]


def test_a_removed_subscriptions_late_write_cannot_land_on_its_successor(
    backend: Backend, clock: FakeClock
) -> None:
    hook = Hook()
    service, _ = instance(backend, clock, hook)
    service.create("s", webhook(), ROOT)
    service.remove("s")
    tombstone = service.store.get("s")
    assert tombstone is not None and tombstone.deleted
    service.create("s", webhook(pattern="jobs/**"), ROOT)
    with pytest.raises(Conflict):  # a second re-creation over the tombstone it read
        service.store.insert(replace(tombstone, deleted=False), tombstone)
    with pytest.raises(Conflict):  # the removed one's own write, late
        service.store.replace(tombstone, tombstone.version)
    assert service.describe("s")[0].config.pattern == "jobs/**"


def test_failed_tasks_are_handed_back(backend: Backend, clock: FakeClock) -> None:
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(), ROOT)
    create_stream(backend.store, "jobs/x", b"abc")
    broken = service.store.link

    def throttled(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailable("throttled")

    service.store.link = throttled  # type: ignore[method-assign]
    notice = Task(TaskKind.NOTICE, "jobs/x")
    assert service.run([notice]) == [notice]
    service.store.link = broken  # type: ignore[method-assign]
    assert service.run([notice]) == []
    run_all((service, tasks))
    assert [b["streams"][0]["path"] for b in hook.bodies] == ["jobs/x"]


def test_an_ack_cut_inside_an_append_is_kept_exact(backend: Backend, clock: FakeClock) -> None:
    """A worker that read a response cut inside a large append acks that offset (`_i`): the
    subscription reports it the same way, so the next worker resumes at that very byte rather
    than at the append's start; a later plain ack replaces it."""
    hook = Hook()
    service, tasks = instance(backend, clock, hook)
    service.create("s", webhook(lease_ttl_ms=5000), ROOT)
    create_stream(backend.store, "jobs/x", b"0123456789")
    service.changed("jobs/x")
    run_all((service, tasks))
    wake = hook.bodies[-1]
    token = f"Bearer {wake['callback_token']}"
    heartbeat = json.loads(ack_body(wake, "jobs/x", 4))
    heartbeat["acks"][0]["offset"] = format_offset(4, inside=True)
    heartbeat["done"] = False
    complete(service, "s", token, json.dumps(heartbeat).encode())
    _, statuses = service.describe("s")
    reported = [stream_report(status) for status in statuses]
    assert reported[0]["acked_offset"] == format_offset(4, inside=True)
    assert statuses[0].snapshot().report()["acked_offset"] == format_offset(4, inside=True)
    complete(service, "s", token, ack_body(wake, "jobs/x", 10))
    _, statuses = service.describe("s")
    assert stream_report(statuses[0])["acked_offset"] == format_offset(10)
