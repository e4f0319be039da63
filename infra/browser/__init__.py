"""Debian's Chromium and its driver, for the console's tests: found where Debian installs them
(`/usr/bin/chromium`, `/usr/bin/chromedriver`, or `$DSAWS_CHROMIUM` / `$DSAWS_CHROMEDRIVER`),
installed with apt-get when missing and running as root (the way the CDN tests install nginx),
and otherwise explained (`ChromiumUnavailable`, which the tests skip with).

    paths = install_chromium()         # ChromiumPaths(browser=..., driver=...)
    driver = start_chrome(paths)       # headless Chrome WebDriver (needs selenium: the dev extra)

Selenium is imported only by `start_chrome` and `chrome_options`: the package itself needs
nothing beyond the standard library."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._install import (
    INSTALL_HINT,
    PACKAGES,
    ChromiumPaths,
    ChromiumUnavailable,
    Host,
    find_chromium,
    install_chromium,
)

if TYPE_CHECKING:
    from ._driver import WINDOW_SIZE, chrome_options, start_chrome

_SELENIUM_NAMES = {"WINDOW_SIZE", "chrome_options", "start_chrome"}


def __getattr__(name: str) -> Any:
    """The names that need selenium, imported on first use."""
    if name not in _SELENIUM_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}._driver"), name)


__all__ = [
    "INSTALL_HINT",
    "PACKAGES",
    "WINDOW_SIZE",
    "ChromiumPaths",
    "ChromiumUnavailable",
    "Host",
    "chrome_options",
    "find_chromium",
    "install_chromium",
    "start_chrome",
]
