"""The console where the server is less obliging: no listing (the page says how to turn it on and
still opens a stream by path), SSE connections that end every second (the tail reconnects from
the last offset with the cursor, losing and repeating nothing), and a retention run that cut the
offset the tail asks for (410: the page offers the earliest offset, and reads on from there)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from browser_support import BrowserLog, wait_for
from console_pages import (
    append,
    create,
    messages,
    open_page,
    open_stream,
    stream_route,
    stream_url,
    tail_state,
    wait_message,
)
from console_support import ConsoleServer, running_console
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By

# `dsaws serve` sealing every 0.2 s into small segments and running retention every 0.3 s with
# cuts in effect at once (as tests/client/test_offset_gone.py runs it).
RETAINING = {
    "DS_SEAL_INTERVAL": "0.2",
    "DS_SEAL_HOT_BYTES": "0",
    "DS_SEGMENT_BYTES": "500",
    "DS_SEAL_PAGE_BYTES": "250",
    "DS_RETENTION_INTERVAL": "0.3",
    "DS_RETENTION_DELAY": "0",
}


@pytest.fixture(scope="module")
def terse_server() -> Iterator[ConsoleServer]:
    """No listing; SSE connections that last a second."""
    with running_console(env={"DS_LISTING": "false", "DS_SSE_LIFETIME": "1"}) as server:
        yield server


@pytest.fixture(scope="module")
def retaining_server() -> Iterator[ConsoleServer]:
    with running_console(env=RETAINING) as server:
        yield server


def test_without_the_listing_the_page_says_how_and_opens_by_path(
    driver: Chrome, terse_server: ConsoleServer, browser_log: BrowserLog
) -> None:
    create(terse_server, "unlisted/room", body=json.dumps({"hello": "there"}))
    open_page(driver, terse_server, "/streams")
    off = wait_for(driver, lambda d: d.find_element(By.ID, "listing-off"))
    assert "DS_LISTING=true" in off.text and "EnableListing=true" in off.text
    driver.find_element(By.ID, "open-path").send_keys("unlisted/room")
    driver.find_element(By.ID, "open-submit").click()
    wait_for(driver, lambda d: d.current_url.endswith(stream_route("unlisted/room")))
    wait_message(driver, '"hello": "there"')
    browser_log.assert_clean(ignore=[r"\b404\b"])  # the listing's answer


def test_the_tail_reconnects_when_the_server_ends_sse(
    driver: Chrome, terse_server: ConsoleServer, browser_log: BrowserLog
) -> None:
    path = "terse/chat"
    create(terse_server, path)
    open_stream(driver, terse_server, path)
    for n in range(8):  # over four SSE connections or more
        append(terse_server, path, json.dumps({"n": n}))
        wait_message(driver, f'"n": {n}', timeout=3)
        time.sleep(0.4)
    assert [json.loads(body)["n"] for _, body in messages(driver)] == list(range(8))
    assert driver.execute_script("return window.DSConsole.stats().connections") >= 3
    # Text too.
    create(terse_server, "terse/log", "text/plain")
    open_stream(driver, terse_server, "terse/log")
    for n in range(4):
        append(terse_server, "terse/log", f"line {n}\n", "text/plain")
        wait_message(driver, f"line {n}", timeout=3)
        time.sleep(0.6)
    assert "".join(body for _, body in messages(driver)) == "".join(f"line {n}\n" for n in range(4))
    assert tail_state(driver) == "live"
    browser_log.assert_clean()


def _settled_earliest(server: ConsoleServer, path: str, within: float = 30.0) -> str:
    """The earliest offset once the server's runs have cut the stream and stopped moving it.
    (Its sealer and retention run wait for a second without requests: ask every 1.5 s.)"""
    deadline = time.monotonic() + within
    earliest = None
    while time.monotonic() < deadline:
        time.sleep(1.5)
        now = httpx.head(stream_url(server, path)).headers.get("Stream-Earliest-Offset")
        if now is not None and now == earliest:
            return now
        earliest = now
    raise AssertionError(f"no settled earliest offset within {within} s (last: {earliest})")


def test_an_offset_retention_dropped_offers_the_earliest(
    driver: Chrome, retaining_server: ConsoleServer, browser_log: BrowserLog
) -> None:
    server = retaining_server
    path = "kept/last-kb"
    create(server, path, headers={"Stream-Retention": "max-bytes=1000"})
    written = [{"n": n, "pad": "x" * 30} for n in range(60)]
    offsets = [
        append(server, path, json.dumps(message)).headers["Stream-Next-Offset"]
        for message in written
    ]
    earliest = _settled_earliest(server, path)
    old = offsets[0]
    assert old < earliest

    open_page(driver, server, stream_route(path) + "?offset=" + old)
    wait_for(driver, lambda d: tail_state(d) == "gone", 10)
    gone = driver.find_element(By.ID, "tail-gone").text
    assert old in gone and earliest in gone
    assert driver.find_element(By.CSS_SELECTOR, "[data-test=meta-earliest-offset]").text == (
        earliest
    )
    driver.find_element(By.ID, "tail-jump-earliest").click()
    wait_for(driver, lambda d: tail_state(d) == "live")
    wait_message(driver, '"n": 59')
    shown = messages(driver)
    kept = written[offsets.index(earliest) + 1 :]
    assert [json.loads(body) for _, body in shown] == kept
    assert shown[0][0] == earliest
    assert not driver.find_element(By.ID, "tail-gone").is_displayed()
    browser_log.assert_clean(ignore=[r"\b410\b"])
