"""What the console must not do: let a read-only token append, close or delete (disabled in the
page, refused by the server anyway), or run anything a stream carries. Hostile stream content
(script tags, event handlers, `javascript:` links, `</textarea>`, a 1 MB line, invalid UTF-8)
and a hostile stream name are shown as text, literally, and nothing runs."""

from __future__ import annotations

import json
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
    wait_message,
)
from console_support import AuthConsoleServer, ConsoleServer
from selenium.webdriver import ActionChains, Chrome
from selenium.webdriver.common.by import By

Screenshot = Callable[..., Path]
TITLE = "Durable Streams console"
_SEND_WITH_THE_PAGES_TOKEN = """
const [url, done] = arguments;
fetch(url, {method: 'POST', body: '{"from": "the page"}', headers: {
  'Content-Type': 'application/json',
  'Authorization': 'Bearer ' + sessionStorage.getItem('dsconsole.token')}})
  .then((r) => done(r.status), (e) => done(String(e)));
"""


def _use_token(driver: Chrome, token: str) -> None:
    field = driver.find_element(By.ID, "token-input")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.ID, "token-use").click()
    wait_for(driver, lambda d: "Token in use" in d.find_element(By.ID, "token-status").text)


def test_a_read_only_token_cannot_append_close_or_delete(
    driver: Chrome,
    auth_console_server: AuthConsoleServer,
    browser_log: BrowserLog,
    screenshot: Screenshot,
) -> None:
    server = auth_console_server
    admin = server.headers("append,create,delete,read:*")
    create(server, "ro/room", body=json.dumps({"hello": "reader"}), headers=admin)

    # Without a token: the token box, and the listing refused (401) as text.
    open_page(driver, server, "/streams")
    assert driver.find_element(By.ID, "token-box").is_displayed()
    assert "no token" in driver.find_element(By.ID, "session-info").text
    refused = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=error]"))
    assert "401" in refused[0].text

    read_only = server.token("read:*")
    _use_token(driver, read_only)
    assert driver.find_element(By.ID, "session-info").text.split() == ["token", "allows", "read:*"]
    # Kept for the tab only, and never in a URL.
    storage = driver.execute_script(
        "return [sessionStorage.getItem('dsconsole.token'), localStorage.length]"
    )
    assert storage == [read_only, 0]
    assert read_only not in driver.current_url
    links = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=stream-link]"))
    assert [a.text for a in links] == ["ro/room"]
    assert not driver.find_element(By.ID, "create-submit").is_enabled()

    open_stream(driver, server, "ro/room")
    wait_message(driver, '"hello": "reader"')
    for control in ("append-input", "append-send", "stream-close", "stream-delete"):
        assert not driver.find_element(By.ID, control).is_enabled(), control
    denied = driver.find_element(By.ID, "append-denied").text
    assert denied == "Your token may not append to this stream."
    assert driver.find_element(By.ID, "operator-denied").is_displayed()
    assert read_only not in driver.current_url
    screenshot("read-only-token")

    # The server refuses the same append with that token: from the page and from the API.
    url = server.stream_url("ro/room")
    assert driver.execute_async_script(_SEND_WITH_THE_PAGES_TOKEN, url) == 403
    answer = httpx.post(
        url,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {read_only}"},
        content='{"from": "the API"}',
    )
    assert answer.status_code == 403
    assert httpx.get(url, headers=admin).json() == [{"hello": "reader"}]

    # Operator pages say what they need.
    open_page(driver, server, "/overview")
    assert "operate" in driver.find_element(By.ID, "overview-denied").text

    # A token that may append under ro/ (not delete): append is enabled, delete is not.
    open_page(driver, server, stream_route("ro/room"))
    _use_token(driver, server.token("read,append:ro/"))
    wait_for(driver, lambda d: d.find_element(By.ID, "append-input").is_enabled())
    assert driver.find_element(By.ID, "stream-close").is_enabled()
    assert not driver.find_element(By.ID, "stream-delete").is_enabled()
    driver.find_element(By.ID, "append-input").send_keys('{"from": "an appender"}')
    driver.find_element(By.ID, "append-send").click()
    wait_message(driver, "an appender")

    driver.find_element(By.ID, "token-forget").click()
    wait_for(driver, lambda d: "no token" in d.find_element(By.ID, "session-info").text)
    assert driver.execute_script("return sessionStorage.getItem('dsconsole.token')") is None
    # The refusals the test provoked are logged as failed requests; nothing else is.
    browser_log.assert_clean(ignore=[r"\b40[13]\b"])


HOSTILE_NAME = "hostile/<b>bold</b>\"onmouseover=\"window.__pwned=1;document.title='pwned'"
HOSTILE_MESSAGES = [
    "<script>window.__pwned = 'script'; document.title = 'pwned'</script>",
    "<img src=x onerror=\"window.__pwned='img';document.title='pwned'\">",
    {"href": "javascript:window.__pwned='link'", "html": '<a href="javascript:alert(1)">x</a>'},
    "</textarea><script>window.__pwned = 'textarea'</script>",
    "</pre><svg onload=\"window.__pwned='svg'\"></svg>",
    '"><iframe srcdoc="<script>parent.__pwned=1</script>">',
]
LONG_LINE = "A" * (1024 * 1024) + "END-OF-LONG-LINE"
HOSTILE_TEXT = (
    b"<script>window.__pwned='text'</script>\n"
    b"<a href=\"javascript:window.__pwned='a'\">click me</a>\n"
    b"</textarea><img src=x onerror=\"window.__pwned='t-img'\">\n"
    b"bad bytes: \xff\xfe\xc3\x28 end\n"
)
# Whatever the stream carried, the page holds only its own elements: no element with an inline
# handler, no javascript: link, its five scripts, nothing the payloads would have made.
_PAGE_IS_ITS_OWN = """
const all = Array.from(document.querySelectorAll('*'));
return {
  pwned: window.__pwned === undefined ? null : String(window.__pwned),
  title: document.title,
  handlers: all.filter((e) => Array.from(e.attributes).some((a) => a.name.startsWith('on')))
    .map((e) => e.outerHTML.slice(0, 80)),
  scripts: document.scripts.length,
  foreign: document.querySelectorAll('b, img, iframe, object, embed, a[href^="javascript:"],'
    + ' svg[onload], textarea:not(#append-input)').length,
};
"""


def _assert_nothing_ran(driver: Chrome, browser_log: BrowserLog) -> None:
    state = driver.execute_script(_PAGE_IS_ITS_OWN)
    assert state == {"pwned": None, "title": TITLE, "handlers": [], "scripts": 5, "foreign": 0}
    assert browser_log.csp_violations() == []


def test_hostile_content_and_names_are_shown_as_text_and_run_nothing(
    driver: Chrome,
    console_server: ConsoleServer,
    browser_log: BrowserLog,
    screenshot: Screenshot,
) -> None:
    server = console_server
    create(server, HOSTILE_NAME, body=json.dumps(HOSTILE_MESSAGES))
    create(server, "hostile/text", "text/plain", HOSTILE_TEXT)
    append(server, "hostile/text", LONG_LINE.encode() + b"\n", "text/plain")

    # The name in the list: its text, literally, linking to its page.
    open_page(driver, server, "/streams?prefix=hostile/")
    links = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=stream-link]"))
    assert sorted(a.text for a in links) == sorted([HOSTILE_NAME, "hostile/text"])
    hostile = next(a for a in links if a.text == HOSTILE_NAME)
    ActionChains(driver).move_to_element(hostile).perform()
    _assert_nothing_ran(driver, browser_log)
    hostile.click()

    # Its page: the name as the title, each payload as the text of a message.
    wait_for(driver, lambda d: d.find_element(By.ID, "stream-path").text == HOSTILE_NAME)
    wait_message(driver, "iframe srcdoc")
    ActionChains(driver).move_to_element(driver.find_element(By.ID, "stream-path")).perform()
    bodies = [json.loads(body) for _, body in messages(driver)]
    assert bodies == HOSTILE_MESSAGES
    _assert_nothing_ran(driver, browser_log)
    screenshot("hostile-content")

    # Text: the markup as text, invalid UTF-8 as U+FFFD, a 1 MB line whole.
    open_stream(driver, server, "hostile/text")
    wait_message(driver, "END-OF-LONG-LINE", timeout=10)
    text = "".join(body for _, body in messages(driver))
    assert text.startswith(HOSTILE_TEXT[:40].decode())
    assert "</textarea><img src=x onerror=\"window.__pwned='t-img'\">" in text
    assert "bad bytes: \ufffd\ufffd\ufffd( end" in text
    assert LONG_LINE in text
    # Typed into the append box: sent as text, shown as text.
    payload = "</textarea><img src=x onerror=\"window.__pwned='typed'\">"
    driver.find_element(By.ID, "append-input").send_keys(payload)
    driver.find_element(By.ID, "append-send").click()
    wait_message(driver, "window.__pwned='typed'")
    assert httpx.get(stream_url(server, "hostile/text")).text.endswith(payload)
    _assert_nothing_ran(driver, browser_log)
    screenshot("hostile-text")

    # An error naming a hostile path is text too.
    open_page(driver, server, stream_route("nope/<img src=x onerror=window.__pwned=7>"))
    error = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "[data-test=error]"))
    assert "404" in error[0].text
    assert driver.find_element(By.ID, "stream-path").text == (
        "nope/<img src=x onerror=window.__pwned=7>"
    )
    _assert_nothing_ran(driver, browser_log)
    browser_log.assert_clean(ignore=[r"\b404\b"])


_ADD_SCRIPT = """
const [src, done] = arguments;
const script = document.createElement('script');
script.src = src;
script.onload = () => done('ran');
script.onerror = () => done('refused');
document.head.appendChild(script);
"""


def test_a_stream_served_as_javascript_cannot_run_in_the_page(
    driver: Chrome, console_server: ConsoleServer, browser_log: BrowserLog
) -> None:
    """A writer may give a stream a JavaScript content type, and it is served from the
    console's origin: were it to get into the page (`'self'` would admit it), it would run
    with the page's token. Only the scripts the page's own tags name with its nonce run."""
    server = console_server
    create(server, "hostile/evil.js", "application/javascript", "window.__pwned = 'stream';")
    open_page(driver, server, "/streams")
    browser_log.collect()  # what loading the page logged: nothing of interest
    outcome = driver.execute_async_script(_ADD_SCRIPT, stream_url(server, "hostile/evil.js"))
    assert outcome == "refused"
    assert driver.execute_script("return window.__pwned === undefined")
    assert any("script-src" in entry["message"] for entry in browser_log.csp_violations())
