"""What the browser tests share besides their fixtures: waiting for the page, the page's console
messages (JS errors, CSP violations), and screenshots."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from selenium.webdriver import Chrome
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from support import ROOT

T = TypeVar("T")
SCREENSHOTS = ROOT / "build" / "console-screenshots"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Chromium logs what a Content-Security-Policy refused as source "security", saying so.
_CSP = re.compile(r"Content Security Policy")

LogEntry = dict[str, Any]


def wait_for(
    driver: WebDriver,
    condition: Callable[[WebDriver], T],
    timeout: float = 5.0,
    message: str = "",
) -> T:
    """`condition(driver)`'s first truthy value, polled every 50 ms (Selenium's WebDriverWait:
    its expected_conditions fit, and NoSuchElementException counts as not yet); TimeoutException
    with `message` after `timeout` seconds."""
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition, message)


class BrowserLog:
    """The page's console messages (Chromium's `goog:loggingPrefs` browser log): each call to
    `driver.get_log("browser")` hands over what came since the last one, so this keeps them."""

    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver
        self.entries: list[LogEntry] = []

    def collect(self) -> list[LogEntry]:
        """Every entry so far (each has level, message, source, timestamp)."""
        self.entries.extend(self.driver.get_log("browser"))
        return list(self.entries)

    def clear(self) -> None:
        self.collect()
        self.entries.clear()

    def errors(self, ignore: Iterable[str] = ()) -> list[LogEntry]:
        """The SEVERE entries (uncaught exceptions, console.error, CSP refusals, failed
        requests: a 403 the test provoked shows as one) whose message matches none of the
        `ignore` regular expressions."""
        patterns = [re.compile(pattern) for pattern in ignore]
        return [
            entry
            for entry in self.collect()
            if entry["level"] == "SEVERE"
            and not any(pattern.search(entry["message"]) for pattern in patterns)
        ]

    def csp_violations(self) -> list[LogEntry]:
        """What the page's CSP refused (inline script or style, a fetch elsewhere, eval)."""
        return [
            entry
            for entry in self.collect()
            if entry["source"] == "security" or _CSP.search(entry["message"])
        ]

    def assert_clean(self, ignore: Iterable[str] = ()) -> None:
        """No JS error and no CSP violation (beyond what `ignore` matches)."""
        errors = self.errors(ignore)
        assert not errors, "the page logged errors:\n" + "\n".join(
            f"{entry['level']} {entry['source']}: {entry['message']}" for entry in errors
        )


def save_screenshot(driver: Chrome, name: str, *, full_page: bool = False) -> Path:
    """The page as the browser shows it, in build/console-screenshots/<name>.png (the window,
    or with `full_page` the whole page however long); returns the file's path."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"screenshot name {name!r}: letters, digits, '.', '_' and '-' only")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    path.write_bytes(_full_page_png(driver) if full_page else driver.get_screenshot_as_png())
    return path


def _full_page_png(driver: Chrome) -> bytes:
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    return base64.b64decode(shot["data"])
