"""The console's pages in Chromium against `dsaws serve`: the list of streams, creating a stream
and appending to it from the page and from the API (both in the tail within a second), the JSON,
text and binary views, close and delete behind the page's own dialog, the subscriptions and the
overview with its plots. Each test writes a screenshot of its page (build/console-screenshots)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
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
from console_support import ConsoleServer
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

Screenshot = Callable[..., Path]


def test_create_a_stream_and_see_appends_from_the_page_and_the_api(
    driver: Chrome,
    console_server: ConsoleServer,
    browser_log: BrowserLog,
    screenshot: Screenshot,
) -> None:
    server = console_server
    create(server, "demo/orders", body=b'[{"order": 1, "item": "tea"}]')
    create(server, "demo/logs", "text/plain", b"boot ok\n")
    create(server, "demo/frames", "application/octet-stream", b"\x00\x01")
    create(server, "demo/session", "text/plain", headers={"Stream-TTL": "3600"})
    open_page(driver, server, "/streams?prefix=demo/")
    links = wait_for(
        driver,
        lambda d: (
            [a.text for a in d.find_elements(By.CSS_SELECTOR, "[data-test=stream-link]")] or None
        ),
    )
    assert links == ["demo/frames", "demo/logs", "demo/orders", "demo/session"]
    rows = driver.find_elements(By.CSS_SELECTOR, "[data-test=stream-row]")
    assert "application/json" in rows[2].text and "open" in rows[2].text
    assert "TTL 1 h" in rows[3].text
    screenshot("streams")

    # Create from the page: it opens the new stream, its tail live.
    driver.find_element(By.ID, "create-path").send_keys("demo/made-in-the-page")
    Select(driver.find_element(By.ID, "create-type")).select_by_value("application/json")
    driver.find_element(By.ID, "create-submit").click()
    wait_for(driver, lambda d: d.current_url.endswith(stream_route("demo/made-in-the-page")))
    wait_for(driver, lambda d: tail_state(d) == "live", 10)
    made = httpx.head(stream_url(server, "demo/made-in-the-page"))
    assert made.status_code == 200
    assert made.headers["content-type"].startswith("application/json")

    # Append from the page.
    box = driver.find_element(By.ID, "append-input")
    box.send_keys('{"from": "the page", "n": 1}')
    send = driver.find_element(By.ID, "append-send")
    assert send.is_enabled()
    sent = time.monotonic()
    send.click()
    wait_message(driver, '"from": "the page"', timeout=1.0)
    assert time.monotonic() - sent < 1.0
    assert "Appended" in driver.find_element(By.ID, "append-status").text

    # Append from the API: in the tail within a second.
    sent = time.monotonic()
    append(server, "demo/made-in-the-page", json.dumps({"from": "the API", "n": 2}))
    wait_message(driver, '"from": "the API"', timeout=1.0)
    assert time.monotonic() - sent < 1.0
    bodies = [body for _, body in messages(driver)]
    assert [json.loads(body)["n"] for body in bodies] == [1, 2]

    # JSON is checked before it is sent: the parse error shown, the button disabled.
    box.send_keys("{oops")
    wait_for(driver, lambda d: "Not JSON" in d.find_element(By.ID, "append-error").text)
    assert not send.is_enabled()
    screenshot("stream-append")
    browser_log.assert_clean()


def test_json_text_and_binary_views(
    driver: Chrome,
    console_server: ConsoleServer,
    browser_log: BrowserLog,
    screenshot: Screenshot,
) -> None:
    server = console_server
    # JSON: each message pretty-printed with the offset it was read from.
    first = {"user": "ada", "text": "hello", "tags": ["a", "b"], "n": 1}
    second = {"user": "bob", "text": "hi", "nested": {"ok": True, "none": None}}
    create(server, "views/chat", body=json.dumps([first, second]))
    opened = append(server, "views/chat", json.dumps({"user": "ada", "text": "third"}))
    open_stream(driver, server, "views/chat")
    wait_message(driver, "third")
    shown = messages(driver)
    assert [body for _, body in shown[:2]] == [json.dumps(m, indent=2) for m in (first, second)]
    assert [offset for offset, _ in shown[:2]] == ["start", "start"]
    tail = opened.headers["Stream-Next-Offset"]
    later = append(server, "views/chat", json.dumps({"user": "bob", "text": "live"}))
    offset, body = wait_message(driver, '"live"')
    assert offset == tail  # read live from where the stream ended before it
    assert json.loads(body) == {"user": "bob", "text": "live"}
    assert driver.find_element(By.ID, "tail-position").text == later.headers["Stream-Next-Offset"]
    meta = driver.find_element(By.CSS_SELECTOR, "[data-test=meta-content-type]").text
    assert meta == "application/json"
    screenshot("stream-json")

    # Text: shown as text, appended from the page as typed.
    create(server, "views/log", "text/plain; charset=utf-8", "boot ok\nlistening on :8080\n")
    open_stream(driver, server, "views/log")
    wait_message(driver, "listening on :8080")
    assert messages(driver)[0][1] == "boot ok\nlistening on :8080\n"
    driver.find_element(By.ID, "append-input").send_keys("GET /health 200 — ünïcode")
    driver.find_element(By.ID, "append-send").click()
    wait_message(driver, "GET /health 200 — ünïcode")
    assert httpx.get(stream_url(server, "views/log")).text.endswith("GET /health 200 — ünïcode")
    screenshot("stream-text")

    # Binary: a hex dump, followed by long-poll; appended from the page as hex.
    create(server, "views/frames", "application/octet-stream", b"\x00\x01\x02hello\xff" * 3)
    open_stream(driver, server, "views/frames")
    assert "long-poll" in driver.find_element(By.ID, "tail-status").text
    _, dump = wait_message(driver, "68 65")
    assert dump.splitlines()[0] == (
        "00000000  00 01 02 68 65 6c 6c 6f  ff 00 01 02 68 65 6c 6c  |...hello....hell|"
    )
    assert dump.splitlines()[1].startswith("00000010  6f ff 00 01 02 68 65 6c")
    box = driver.find_element(By.ID, "append-input")
    box.send_keys("zz")
    assert "Not hex" in driver.find_element(By.ID, "append-error").text
    assert not driver.find_element(By.ID, "append-send").is_enabled()
    box.clear()
    box.send_keys("de ad be ef 0a")
    driver.find_element(By.ID, "append-send").click()
    wait_message(driver, "de ad be ef 0a")
    assert httpx.get(stream_url(server, "views/frames")).content.endswith(b"\xde\xad\xbe\xef\n")
    append(server, "views/frames", b"\xca\xfe", "application/octet-stream")
    wait_message(driver, "ca fe", timeout=2)
    screenshot("stream-binary")
    browser_log.assert_clean()


def test_pause_jump_close_and_delete(
    driver: Chrome, console_server: ConsoleServer, browser_log: BrowserLog
) -> None:
    server = console_server
    create(server, "views/ops", body=json.dumps([{"n": n} for n in range(3)]))
    open_stream(driver, server, "views/ops")
    wait_message(driver, '"n": 2')

    driver.find_element(By.ID, "tail-pause").click()
    wait_for(driver, lambda d: tail_state(d) == "paused")
    append(server, "views/ops", json.dumps({"n": 3}))
    time.sleep(0.3)
    assert not any('"n": 3' in body for _, body in messages(driver))
    driver.find_element(By.ID, "tail-pause").click()  # resume: reads on from where it paused
    wait_message(driver, '"n": 3')
    assert len(messages(driver)) == 4

    driver.find_element(By.ID, "tail-from-now").click()
    wait_for(driver, lambda d: tail_state(d) == "live" and not messages(d))
    append(server, "views/ops", json.dumps({"n": 4}))
    wait_message(driver, '"n": 4')
    assert len(messages(driver)) == 1
    driver.find_element(By.ID, "tail-from-start").click()
    wait_message(driver, '"n": 4')
    assert len(messages(driver)) == 5

    # Close: the page's own dialog; cancel does nothing, confirm closes.
    driver.find_element(By.ID, "stream-close").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "confirm-dialog").is_displayed())
    driver.find_element(By.ID, "confirm-cancel").click()
    assert "Stream-Closed" not in httpx.head(stream_url(server, "views/ops")).headers
    driver.find_element(By.ID, "stream-close").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "confirm-ok").is_displayed())
    driver.find_element(By.ID, "confirm-ok").click()
    wait_for(driver, lambda d: tail_state(d) == "closed")
    assert httpx.head(stream_url(server, "views/ops")).headers["Stream-Closed"] == "true"
    closed = "[data-test=meta-closed]"
    wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, closed).text == "yes")
    assert not driver.find_element(By.ID, "append-send").is_enabled()
    assert not driver.find_element(By.ID, "stream-close").is_enabled()

    driver.find_element(By.ID, "stream-delete").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "confirm-ok").is_displayed())
    driver.find_element(By.ID, "confirm-ok").click()
    wait_for(driver, lambda d: d.current_url.endswith("#/streams"))
    assert httpx.head(stream_url(server, "views/ops")).status_code == 404
    browser_log.assert_clean()


def test_subscriptions_and_overview(
    driver: Chrome,
    console_server: ConsoleServer,
    browser_log: BrowserLog,
    screenshot: Screenshot,
) -> None:
    server = console_server
    create(server, "subs/room-1")
    create(server, "subs/room-2")
    create(server, "wake/pool")
    hook = {
        "type": "webhook",
        "pattern": "subs/*",
        "description": "rooms to the bot",
        # Nothing listens there: the wakes fail, as the page shows.
        "webhook": {"url": "http://127.0.0.1:9/hook"},
    }
    pull = {"type": "pull-wake", "pattern": "subs/room-2", "wake_stream": "wake/pool"}
    for name, body in (("rooms-hook", hook), ("rooms-pull", pull)):
        made = httpx.put(server.stream_url(f"__ds/subscriptions/{name}"), json=body)
        assert made.status_code == 201, made.text
    for n in range(5):
        append(server, "subs/room-1", json.dumps({"n": n}))
    append(server, "subs/room-2", json.dumps([{"n": n} for n in range(20)]))

    open_page(driver, server, "/subscriptions")
    cards = wait_for(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=subscription]") or None,
    )
    assert [card.get_attribute("data-id") for card in cards] == ["rooms-hook", "rooms-pull"]
    hook_card, pull_card = cards
    assert "subs/*" in hook_card.text and "http://127.0.0.1:9/hook" in hook_card.text
    links = hook_card.find_elements(By.CSS_SELECTOR, "[data-test=subscription-link-row]")
    assert sorted(row.find_element(By.TAG_NAME, "a").text for row in links) == [
        "subs/room-1",
        "subs/room-2",
    ]
    assert "wake/pool" in pull_card.text
    assert "pending" in pull_card.text  # room-2 has bytes past the acked offset
    summary = driver.find_element(By.ID, "subscriptions-summary").text
    assert "Subscriptions" in summary and "Links behind" in summary
    screenshot("subscriptions")

    open_page(driver, server, "/overview")
    line = wait_for(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, "#plot-appends path.plot-line") or None,
    )
    assert line[0].get_attribute("d").startswith("M")
    for plot in ("plot-appends", "plot-bytes", "plot-reads"):
        assert driver.find_element(By.ID, plot).tag_name == "svg"
    appends = driver.find_element(By.ID, "plot-appends").find_element(By.XPATH, "..").text
    in_window = int(appends.split(" in the window")[0].split()[-1].replace(",", ""))
    assert in_window >= 6  # at least this test's appends
    streams = driver.find_element(By.CSS_SELECTOR, "[data-test=figure-streams]")
    assert int(streams.text.split()[0]) >= 3
    assert "as of" in driver.find_element(By.ID, "stored-age").text
    driver.find_element(By.ID, "overview-refresh").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "overview-refresh").is_enabled())
    screenshot("overview")
    browser_log.assert_clean()
