"""Driving the console's pages in the browser tests: opening a page, waiting for the tail, reading
its messages. The element ids are listed at the top of core/console/static/assets/console.js."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import httpx
from browser_support import wait_for
from console_support import ConsoleServer
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

# The messages in the tail, newest last: [offset label, body text] each.
_MESSAGES = """
return Array.from(document.querySelectorAll('#tail-list [data-test=tail-message]'), (m) => [
  m.querySelector('[data-test=msg-offset]').textContent,
  m.querySelector('[data-test=msg-body]').textContent,
]);
"""


def quoted_path(path: str) -> str:
    """A stream path as a URL path, each segment percent-encoded."""
    return "/".join(urllib.parse.quote(segment, safe="") for segment in path.split("/"))


def stream_url(server: ConsoleServer, path: str) -> str:
    return server.stream_url(quoted_path(path))


def create(
    server: ConsoleServer,
    path: str,
    content_type: str = "application/json",
    body: bytes | str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    answer = httpx.put(
        stream_url(server, path),
        headers={"Content-Type": content_type, **(headers or {})},
        content=body,
    )
    assert answer.status_code in (200, 201), answer.text
    return answer


def append(
    server: ConsoleServer,
    path: str,
    body: bytes | str,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    answer = httpx.post(
        stream_url(server, path),
        headers={"Content-Type": content_type, **(headers or {})},
        content=body,
        timeout=30,
    )
    assert answer.status_code in (200, 204), answer.text
    return answer


def page_url(server: ConsoleServer, route: str) -> str:
    return f"{server.console_url}#{route}"


def stream_route(path: str) -> str:
    return "/stream/" + urllib.parse.quote(path, safe="")


def open_page(driver: Chrome, server: ConsoleServer, route: str) -> None:
    """Load the console at `route` ("/streams", "/stream/a%2Fb", ...) and wait for the page to
    have rendered something besides "Loading…"."""
    driver.get(page_url(server, route))
    wait_for(
        driver,
        lambda d: d.execute_script("return document.body.dataset.page || ''"),
        message="the console did not render a page",
    )


def open_stream(driver: Chrome, server: ConsoleServer, path: str, timeout: float = 10) -> None:
    """The stream's page, its tail live (caught up, following)."""
    open_page(driver, server, stream_route(path))
    wait_live(driver, timeout)


def tail_state(driver: Chrome) -> str:
    return str(driver.find_element(By.ID, "tail-status").get_attribute("data-state"))


def wait_live(driver: Chrome, timeout: float = 10) -> None:
    wait_for(
        driver,
        lambda d: tail_state(d) == "live",
        timeout,
        message="the tail did not go live",
    )


def messages(driver: Chrome) -> list[tuple[str, str]]:
    return [(offset, body) for offset, body in driver.execute_script(_MESSAGES)]


def wait_message(
    driver: Chrome, needle: str, timeout: float = 5, message: str = ""
) -> tuple[str, str]:
    """The first message in the tail whose body contains `needle`, waited for."""

    def found(d: Chrome) -> tuple[str, str] | None:
        return next(((o, b) for o, b in messages(d) if needle in b), None)

    return wait_for(driver, found, timeout, message or f"no message with {needle!r} in the tail")


def received(driver: Chrome) -> int:
    return int(driver.find_element(By.ID, "tail-received").get_attribute("data-count") or 0)


def type_into(element: WebElement, text: str) -> None:
    """Set a text field's value as typing would (an input event), without typing a megabyte."""
    element.parent.execute_script(
        "arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));",
        element,
        text,
    )


def timed(fn: Any) -> tuple[Any, float]:
    start = time.monotonic()
    value = fn()
    return value, time.monotonic() - start
