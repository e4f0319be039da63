"""The browser tests' fixtures: Debian's Chromium under Selenium for the session (installed
first when missing and running as root; otherwise the tests skip, saying what to install), and
`dsaws serve` with its console per module, without and with access control.

    def test_something(driver, console_server, browser_log, screenshot):
        driver.get(console_server.console_url)
        wait_for(driver, lambda d: d.find_element(By.ID, "app").text != "Loading…")
        screenshot("streams")
        browser_log.assert_clean()
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browser_support import BrowserLog, save_screenshot
from console_support import (
    AuthConsoleServer,
    ConsoleServer,
    running_auth_console,
    running_console,
)
from selenium.common.exceptions import WebDriverException
from selenium.webdriver import Chrome

from durable_streams_aws.infra.browser import (
    ChromiumPaths,
    ChromiumUnavailable,
    install_chromium,
    start_chrome,
)

# Forget what the last test left in the page's origin: a token kept in sessionStorage.
_FORGET = "try { sessionStorage.clear(); localStorage.clear(); } catch (e) {}"


@pytest.fixture(scope="session")
def chromium() -> ChromiumPaths:
    """The system's Chromium and chromedriver, installed with apt-get if need be (as root)."""
    try:
        return install_chromium()
    except ChromiumUnavailable as missing:
        pytest.skip(f"Chromium is unavailable: {missing}")


@pytest.fixture(scope="session")
def browser(chromium: ChromiumPaths) -> Iterator[Chrome]:
    """One headless Chromium for the whole session (1280x900 window), quit at its end."""
    try:
        driver = start_chrome(chromium)
    except WebDriverException as failed:
        pytest.skip(f"Chromium did not start: {failed.msg}")
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def driver(browser: Chrome) -> Iterator[Chrome]:
    """The session's browser for one test: it leaves the page it was on with that page's
    storage cleared, and at about:blank, so nothing (a token, a live tail's connection) is
    carried into the next test, nor holds a connection to a server being stopped."""
    yield browser
    try:
        browser.execute_script(_FORGET)
        browser.get("about:blank")
        browser.delete_all_cookies()
    except WebDriverException:
        pass  # a test that broke the session: the next one finds out


@pytest.fixture
def browser_log(driver: Chrome) -> BrowserLog:
    """The page's console messages since this test began (`.errors()`, `.csp_violations()`,
    `.assert_clean()`)."""
    log = BrowserLog(driver)
    log.clear()
    return log


@pytest.fixture
def screenshot(driver: Chrome) -> Callable[..., Path]:
    """`screenshot(name, full_page=False)`: the page now, in build/console-screenshots/
    <name>.png; returns the path."""

    def take(name: str, *, full_page: bool = False) -> Path:
        return save_screenshot(driver, name, full_page=full_page)

    return take


@pytest.fixture(scope="module")
def console_server() -> Iterator[ConsoleServer]:
    """`dsaws serve --in-memory` with the console and the listing, no access control."""
    with running_console() as server:
        yield server


@pytest.fixture(scope="module")
def auth_console_server() -> Iterator[AuthConsoleServer]:
    """`dsaws serve --in-memory --auth` with the console and the listing; its `token(scope)`
    mints tokens it accepts, and reads under `public/` need none."""
    with running_auth_console() as server:
        yield server
