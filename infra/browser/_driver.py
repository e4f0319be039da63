"""Headless Chromium under Selenium, from the system's browser and driver only.

Both paths are given to Selenium (`Service(executable_path=...)`, `options.binary_location`), so
Selenium Manager, which would otherwise download a browser and a driver, never runs.
"""

from __future__ import annotations

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from ._install import ChromiumPaths, install_chromium

WINDOW_SIZE = (1280, 900)
_ARGUMENTS = (
    "--no-sandbox",  # root in a container has no user namespace for Chromium's sandbox
    "--disable-dev-shm-usage",  # a container's /dev/shm is often 64 MB
    "--enable-precise-memory-info",  # performance.memory unrounded, for the memory tests
    # Nothing on the network but the pages a test opens.
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
)


def chrome_options(
    paths: ChromiumPaths, *, headless: bool = True, window: tuple[int, int] = WINDOW_SIZE
) -> Options:
    """The options the tests' Chromium runs with; the page's console messages (JS errors, CSP
    violations) are kept for `driver.get_log("browser")`."""
    options = Options()
    options.binary_location = paths.browser
    if headless:
        options.add_argument("--headless=new")
    for argument in (*_ARGUMENTS, f"--window-size={window[0]},{window[1]}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return options


def start_chrome(
    paths: ChromiumPaths | None = None,
    *,
    headless: bool = True,
    window: tuple[int, int] = WINDOW_SIZE,
) -> webdriver.Chrome:
    """A Chrome WebDriver session on the system's Chromium (installed first if need be, see
    `install_chromium`); the caller quits it."""
    paths = paths or install_chromium()
    service = Service(executable_path=paths.driver)
    return webdriver.Chrome(
        options=chrome_options(paths, headless=headless, window=window), service=service
    )
