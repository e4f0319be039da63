"""Which requests a loopback-only `dsaws serve` refuses (`core.http.local_only`), decided from
their headers alone. Pure."""

from __future__ import annotations

import pytest

from durable_streams_aws.core.http.local_only import host_name, is_local_origin, refusal

LOCAL = "127.0.0.1:4437"


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("127.0.0.1:4437", "127.0.0.1"),
        ("LOCALHOST", "localhost"),
        ("[::1]:80", "::1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("rebind.evil.example:4437", "rebind.evil.example"),
        ("", ""),
    ],
)
def test_the_name_of_a_host_header(value: str, name: str) -> None:
    assert host_name(value) == name


@pytest.mark.parametrize(
    ("origin", "local"),
    [
        ("http://127.0.0.1:4437", True),
        ("http://localhost:3000", True),
        ("https://localhost", True),
        ("http://[::1]:8080", True),
        ("https://evil.example", False),
        ("http://127.0.0.1.evil.example", False),
        ("http://localhost@evil.example", False),
        ("null", False),
        ("file://", False),
        ("http://localhost:99999", False),
        ("ws://localhost:3000", False),
        ("http://localhost:3000/path", False),
    ],
)
def test_which_origins_are_pages_of_this_machine(origin: str, local: bool) -> None:
    assert is_local_origin(origin) is local


def test_requests_without_a_browser_and_pages_of_this_machine_pass() -> None:
    assert refusal({"host": LOCAL}, ()) is None
    assert refusal({"host": "localhost:4437", "origin": "http://localhost:3000"}, ()) is None
    same = {"host": LOCAL, "origin": f"http://{LOCAL}", "sec-fetch-site": "same-origin"}
    assert refusal(same, ()) is None
    # localhost and 127.0.0.1 are different sites to a browser: the Origin decides.
    other_port = {"host": LOCAL, "origin": "http://localhost:3000", "sec-fetch-site": "cross-site"}
    assert refusal(other_port, ()) is None


def test_another_name_for_the_server_is_refused_whatever_else_it_says() -> None:
    rebound = {"host": "rebind.evil.example:4437", "origin": "http://rebind.evil.example:4437"}
    assert refusal(rebound, ())[0] == 421  # type: ignore[index]
    assert refusal({"host": "rebind.evil.example"}, ("*",))[0] == 421  # type: ignore[index]
    assert refusal({}, ())[0] == 421  # type: ignore[index]


def test_the_local_cdn_is_judged_by_the_host_its_viewer_asked_for() -> None:
    through = {"host": "origin", "x-forwarded-host": "127.0.0.1:8080"}
    assert refusal(through, ()) is None
    rebound = {"host": "origin", "x-forwarded-host": "rebind.evil.example:8080"}
    assert refusal(rebound, ())[0] == 421  # type: ignore[index]
    assert refusal({"host": "origin"}, ())[0] == 421  # type: ignore[index]


def test_pages_of_other_sites_are_refused_unless_allowed() -> None:
    foreign = {"host": LOCAL, "origin": "https://evil.example"}
    assert refusal(foreign, ())[0] == 403  # type: ignore[index]
    assert refusal(foreign, ("https://app.example",))[0] == 403  # type: ignore[index]
    assert refusal(foreign, ("https://evil.example",)) is None
    assert refusal(foreign, ("*",)) is None
    assert refusal({"host": LOCAL, "origin": "null"}, ())[0] == 403  # type: ignore[index]
    # What a browser sends without an Origin (an image, a navigation) from another site.
    image = {"host": LOCAL, "sec-fetch-site": "cross-site"}
    assert refusal(image, ())[0] == 403  # type: ignore[index]
    assert refusal({"host": LOCAL, "sec-fetch-site": "none"}, ()) is None  # typed in the bar
