"""`dsaws smoke`: a deployment checked end to end as a user would, over plain HTTP.

The checks run in order on two streams of their own (a source and its fork) under `prefix`,
each timed; a failure does not stop the checks that do not depend on it, and the streams are
deleted at the end whatever happened.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from ._verdicts import (
    Outcome,
    Verdict,
    cache_status,
    collapsed,
    failed,
    passed,
    refused_anonymous_write,
    refused_direct_request,
    repeated_read,
    skipped,
)

STREAM_ROOT = "/v1/stream"
LONG_POLLS = 6


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    detail: str
    seconds: float


@dataclass(frozen=True)
class SmokeOptions:
    url: str
    token: str | None = None
    origin: str | None = None  # the origin's own URL, to check that it refuses direct requests
    prefix: str = "smoke/"
    expect_cdn: bool = False  # a missing CDN fails the CDN checks instead of skipping them
    timeout: float = 20.0


class _Stop(Exception):
    """A check whose failure leaves nothing for the later checks to work on."""


@dataclass
class _Session:
    options: SmokeOptions
    checks: list[Check] = field(default_factory=list)
    created: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.base = stream_root(self.options.url)
        auth = {"Authorization": f"Bearer {self.options.token}"} if self.options.token else {}
        self.http = httpx.Client(timeout=self.options.timeout, headers=auth)
        self.anonymous = httpx.Client(timeout=self.options.timeout)
        name = f"{self.options.prefix}{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
        self.source = name
        self.fork = f"{name}-fork"
        self.tail = ""
        self.cdn: bool | None = None  # learnt from the first read's headers

    def url(self, path: str) -> str:
        return f"{self.base}/{path}"

    def check(self, name: str, work: Callable[[], Verdict]) -> Verdict:
        started = time.monotonic()
        try:
            verdict = work()
        except _Stop as stop:
            verdict = failed(str(stop))
        except Exception as error:  # a check's failure is its row, never the end of the report
            verdict = failed(f"{type(error).__name__}: {error}")
        self.checks.append(Check(name, verdict.outcome, verdict.detail, time.monotonic() - started))
        return verdict

    def close(self) -> None:
        self.http.close()
        self.anonymous.close()


def stream_root(url: str) -> str:
    """The streams' root URL: a bare host gets the server's `/v1/stream`."""
    url = url.rstrip("/")
    return url if urlsplit(url).path not in ("", "/") else url + STREAM_ROOT


def run_smoke(options: SmokeOptions) -> list[Check]:
    session = _Session(options)
    try:
        for name, step in _STEPS:
            verdict = session.check(name, lambda step=step: step(session))
            if verdict.outcome is Outcome.FAILED and name in _ESSENTIAL:
                break
    finally:
        if session.created:
            session.check("clean up", lambda: _clean_up(session))
        session.close()
    return session.checks


def format_report(checks: list[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [f"{'check':<{width}}  {'result':<7}  {'ms':>6}  detail"]
    for check in checks:
        millis = f"{check.seconds * 1000:.0f}"
        lines.append(
            f"{check.name:<{width}}  {check.outcome.value:<7}  {millis:>6}  {check.detail}"
        )
    failures = sum(check.outcome is Outcome.FAILED for check in checks)
    lines.append(f"{len(checks)} checks, {failures} failed")
    return "\n".join(lines)


# ------------------------------------------------------------------------- the checks


def _expect(response: httpx.Response, *statuses: int) -> httpx.Response:
    if response.status_code not in statuses:
        wanted = " or ".join(map(str, statuses))
        body = response.text[:200].strip()
        raise _Stop(
            f"{response.request.method} answered {response.status_code} ({body}), not {wanted}"
        )
    return response


def _create(session: _Session) -> Verdict:
    response = _expect(
        session.http.put(session.url(session.source), headers={"Content-Type": "text/plain"}), 201
    )
    session.created.append(session.source)
    return passed(f"201, {response.headers.get('content-type')}")


def _append(session: _Session) -> Verdict:
    response = _expect(
        session.http.post(
            session.url(session.source), content=b"hello ", headers={"Content-Type": "text/plain"}
        ),
        200,
        204,
    )
    session.tail = response.headers.get("stream-next-offset", "")
    if not session.tail:
        return failed("the append's answer has no Stream-Next-Offset")
    return passed(f"{response.status_code}, next offset {session.tail}")


def _catch_up(session: _Session) -> Verdict:
    response = _expect(session.http.get(session.url(session.source), params={"offset": "-1"}), 200)
    session.cdn = cache_status(response.headers) is not None
    if response.content != b"hello ":
        return failed(f"read back {response.content[:40]!r}, wrote b'hello '")
    if response.headers.get("stream-up-to-date") != "true":
        return failed("a read to the tail does not say Stream-Up-To-Date")
    return passed("read back what was appended, up to date")


def _long_poll(session: _Session) -> Verdict:
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(
            session.http.get,
            session.url(session.source),
            params={"offset": session.tail, "live": "long-poll"},
        )
        time.sleep(0.5)
        if waiting.done():
            return failed(
                f"the long-poll returned before any append ({waiting.result().status_code})"
            )
        appended = _expect(
            session.http.post(
                session.url(session.source),
                content=b"world",
                headers={"Content-Type": "text/plain"},
            ),
            200,
            204,
        )
        woken = _expect(waiting.result(), 200)
    session.tail = appended.headers.get("stream-next-offset", session.tail)
    if woken.content != b"world":
        return failed(f"the long-poll woke with {woken.content[:40]!r}, expected b'world'")
    return passed("woken by an append with its data")


def _sse(session: _Session) -> Verdict:
    data: list[str] = []
    controls = 0
    with session.http.stream(
        "GET", session.url(session.source), params={"offset": "-1", "live": "sse"}
    ) as response:
        _expect(response, 200)
        kind = response.headers.get("content-type", "")
        if not kind.startswith("text/event-stream"):
            return failed(f"SSE answered {kind}")
        event = ""
        for line in _lines(response):
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
            elif line.startswith("data:") and event == "data":
                data.append(line.removeprefix("data:").removeprefix(" "))
            elif line.startswith("data:") and event == "control":
                controls += 1
                if "".join(data) == "hello world":
                    break
    if "".join(data) != "hello world":
        return failed(f"SSE delivered {''.join(data)[:40]!r}, expected 'hello world'")
    return passed(f"data and {controls} control event(s)")


def _lines(response: httpx.Response) -> Iterator[str]:
    deadline = time.monotonic() + 10
    for line in response.iter_lines():
        yield line
        if time.monotonic() > deadline:
            return


def _close(session: _Session) -> Verdict:
    _expect(
        session.http.post(
            session.url(session.source),
            headers={"Content-Type": "text/plain", "Stream-Closed": "true"},
        ),
        200,
        204,
    )
    head = _expect(session.http.head(session.url(session.source)), 200)
    if head.headers.get("stream-closed") != "true":
        return failed("HEAD after the close does not say Stream-Closed")
    refused = session.http.post(
        session.url(session.source), content=b"!", headers={"Content-Type": "text/plain"}
    )
    if refused.status_code != 409:
        return failed(f"an append after the close got {refused.status_code}, expected 409")
    return passed("closed; a later append is refused with 409")


def _fork(session: _Session) -> Verdict:
    source_path = urlsplit(session.url(session.source)).path
    _expect(
        session.http.put(session.url(session.fork), headers={"Stream-Forked-From": source_path}),
        201,
    )
    session.created.append(session.fork)
    response = _expect(session.http.get(session.url(session.fork), params={"offset": "-1"}), 200)
    if response.content != b"hello world":
        return failed(f"the fork reads {response.content[:40]!r}, expected b'hello world'")
    return passed("the fork reads its source's data")


def _cdn_skip(session: _Session) -> Verdict | None:
    if session.cdn:
        return None
    if session.cdn is None:
        return failed("not checked: the catch-up read failed, so whether a CDN answers is unknown")
    if session.options.expect_cdn:
        return failed("no cache status header (X-Cache / X-Cache-Status): no CDN in front")
    return skipped("no CDN in front (no X-Cache / X-Cache-Status header)")


def _anonymous_read_refused(response: httpx.Response) -> Verdict | None:
    if response.status_code in (401, 403):
        return skipped(
            f"anonymous reads are refused here ({response.status_code}); token reads are never "
            "cached: give a --prefix under a public read prefix to check the cache"
        )
    return None


def _cache_hit(session: _Session) -> Verdict:
    not_here = _cdn_skip(session)
    if not_here is not None:
        return not_here
    # The source is closed, so its catch-up answer never changes and a shared cache keeps it.
    params = {"offset": "-1"}
    first = session.anonymous.get(session.url(session.source), params=params)
    refused = _anonymous_read_refused(first)
    if refused is not None:
        return refused
    _expect(first, 200)
    second = _expect(session.anonymous.get(session.url(session.source), params=params), 200)
    return repeated_read(cache_status(first.headers), cache_status(second.headers))


def _collapse(session: _Session) -> Verdict:
    not_here = _cdn_skip(session)
    if not_here is not None:
        return not_here
    probe = session.anonymous.get(session.url(session.fork), params={"offset": "-1"})
    refused = _anonymous_read_refused(probe)
    if refused is not None:
        return refused
    params = {
        "offset": _expect(probe, 200).headers.get("stream-next-offset", ""),
        "live": "long-poll",
    }
    cursor = probe.headers.get("stream-cursor")
    if cursor:
        params["cursor"] = cursor
    start = threading.Barrier(LONG_POLLS)

    def poll() -> httpx.Response:
        start.wait()
        return session.anonymous.get(session.url(session.fork), params=params)

    with ThreadPoolExecutor(LONG_POLLS) as pool:
        waiting = [pool.submit(poll) for _ in range(LONG_POLLS)]
        time.sleep(1.0)
        _expect(
            session.http.post(
                session.url(session.fork), content=b"!", headers={"Content-Type": "text/plain"}
            ),
            200,
            204,
        )
        answers = [future.result() for future in waiting]
    wrong = [answer.status_code for answer in answers if answer.status_code != 200]
    if wrong:
        return failed(f"long-polls answered {wrong}, expected 200 with the append")
    return collapsed([cache_status(answer.headers) for answer in answers])


def _anonymous_write(session: _Session) -> Verdict:
    if not session.options.token:
        return skipped("no --token given: access control not checked")
    response = session.anonymous.post(
        session.url(session.fork), content=b"anonymous", headers={"Content-Type": "text/plain"}
    )
    return refused_anonymous_write(response.status_code)


def _locked_origin(session: _Session) -> Verdict:
    if not session.options.origin:
        return skipped("no --origin given: the origin lock not checked")
    direct = f"{stream_root(session.options.origin)}/{session.source}"
    response = session.http.get(direct, params={"offset": "-1"})
    return refused_direct_request(response.status_code)


def _delete(session: _Session) -> Verdict:
    for path in reversed(session.created):
        _expect(session.http.delete(session.url(path)), 204)
    # HEAD, which no cache keeps: a CDN may serve a deleted stream's cached reads until they
    # expire.
    gone = session.http.head(session.url(session.source))
    session.created.clear()
    if gone.status_code != 404:
        return failed(f"HEAD after the delete got {gone.status_code}, expected 404")
    return passed("both streams deleted; HEAD gets 404")


def _clean_up(session: _Session) -> Verdict:
    left = list(reversed(session.created))
    session.created.clear()
    stuck = []
    for path in left:
        status = session.http.delete(session.url(path)).status_code
        if status not in (204, 404):
            stuck.append(f"{path} ({status})")
    if stuck:
        return failed(f"could not delete {', '.join(stuck)}: remove by hand")
    return passed(f"removed {len(left)} stream(s) a failed check left")


_STEPS: tuple[tuple[str, Callable[[_Session], Verdict]], ...] = (
    ("create", _create),
    ("append", _append),
    ("catch-up read", _catch_up),
    ("long-poll woken by an append", _long_poll),
    ("SSE", _sse),
    ("close", _close),
    ("fork", _fork),
    ("CDN: repeated read is a hit", _cache_hit),
    ("CDN: long-polls collapse", _collapse),
    ("anonymous write refused", _anonymous_write),
    ("origin refuses direct requests", _locked_origin),
    ("delete", _delete),
)

# Later checks need what these make.
_ESSENTIAL = {"create", "append"}
