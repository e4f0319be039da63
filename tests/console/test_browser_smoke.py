"""The browser tests' own machinery: Chromium starts from the system's files (Selenium Manager
never runs), the page's console messages and CSP refusals reach the test, screenshots are
written, and both servers serve the console."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from browser_support import BrowserLog, wait_for
from console_support import AuthConsoleServer, ConsoleServer
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.common.selenium_manager import SeleniumManager

from durable_streams_aws.infra.browser import WINDOW_SIZE, ChromiumPaths, start_chrome

_PAGE = """<!doctype html><title>smoke</title><p id="later"></p>
<script>
setTimeout(() => { document.getElementById("later").textContent = "ready"; }, 200);
console.error("smoke: an error the log should carry");
</script>"""


def _data_url(html: str) -> str:
    return "data:text/html;charset=utf-8," + urllib.parse.quote(html)


def test_a_page_its_log_and_its_screenshot(
    driver: Chrome, browser_log: BrowserLog, screenshot: Callable[..., Path]
) -> None:
    driver.get(_data_url(_PAGE))
    assert driver.title == "smoke"
    later = wait_for(driver, lambda d: d.find_element(By.ID, "later").text == "ready" or None)
    assert later
    # performance.memory, with --enable-precise-memory-info, for the tail's memory bound.
    heap = driver.execute_script("return performance.memory.usedJSHeapSize")
    assert isinstance(heap, int) and heap > 0
    assert driver.get_window_size() == {"width": WINDOW_SIZE[0], "height": WINDOW_SIZE[1]}
    (error,) = browser_log.errors()
    assert "an error the log should carry" in error["message"]
    assert browser_log.errors(ignore=["the log should carry"]) == []
    for full_page in (False, True):
        path = screenshot(f"smoke-{full_page}", full_page=full_page)
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        path.unlink()


def test_selenium_manager_never_runs(
    chromium: ChromiumPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Selenium Manager would download a browser and a driver: both paths are given instead."""

    def refuse(*args: object) -> dict[str, str]:
        raise AssertionError(f"Selenium Manager ran: {args}")

    monkeypatch.setattr(SeleniumManager, "binary_paths", refuse)
    another = start_chrome(chromium)
    try:
        capabilities = another.capabilities
        assert capabilities["browserName"] in {"chrome", "chromium"}
        options = capabilities["goog:chromeOptions"]
        assert options.get("debuggerAddress")  # a live session on the system's Chromium
    finally:
        another.quit()


def test_the_console_is_served(
    driver: Chrome,
    console_server: ConsoleServer,
    browser_log: BrowserLog,
    screenshot: Callable[..., Path],
) -> None:
    page = httpx.get(console_server.console_url)
    assert page.status_code == 200
    assert "script-src 'nonce-" in page.headers["content-security-policy"]
    driver.get(console_server.console_url)
    assert "Durable Streams" in driver.title
    screenshot("smoke-console")
    # An inline script is refused by the console's CSP, and the refusal reaches the test.
    driver.execute_script(
        "const s = document.createElement('script'); s.textContent = 'window.ran = 1';"
        "document.head.appendChild(s);"
    )
    wait_for(driver, lambda d: browser_log.csp_violations(), message="no CSP refusal logged")
    assert driver.execute_script("return window.ran === undefined")


def test_the_console_with_access_control(
    driver: Chrome, auth_console_server: AuthConsoleServer
) -> None:
    server = auth_console_server
    session = f"{server.api_url}/session"
    assert httpx.get(session, headers={"Authorization": "Bearer not-a-token"}).status_code == 401
    answer = httpx.get(session, headers=server.headers("read:*"))
    assert answer.status_code == 200
    assert answer.json()["auth"] is True and answer.json()["authenticated"] is True
    refused = httpx.put(server.stream_url("a"), headers=server.headers("read:*"))
    assert refused.status_code == 403
    driver.get(server.console_url)
    assert "Durable Streams" in driver.title
