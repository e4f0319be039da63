"""Webhook URL validation (SSRF prevention) and the address checks delivery repeats on every
DNS answer. Every case uses literal addresses or names that need no network."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from durable_streams_aws.core.subscriptions import _urls
from durable_streams_aws.core.subscriptions._urls import (
    MAX_URL_LENGTH,
    address_allowed,
    allowed_addresses,
    check_webhook_url,
    resolve_allowed,
)
from durable_streams_aws.core.subscriptions.errors import SubscriptionError

PUBLIC_URLS = [
    "https://worker.example/hooks",
    "https://worker.example:8443/hooks?tenant=1&x=%2F",
    "https://a.b.c.worker.example/",
    "https://worker.example",
    "HTTPS://Worker.Example/Hooks",  # scheme and host are case-insensitive
    "https://worker.example./hooks",  # a fully qualified name with its root dot
    "https://xn--bcher-kva.example/",  # an internationalized name, as ASCII
    "https://my_service.worker.example/",
    "https://1worker.example/",
    "https://worker.example/caf\u00e9",  # the path may be any text; the client encodes it
    "https://8.8.8.8/hook",
    "https://1.1.1.1:443/",
    "https://[2606:4700:4700::1111]/hook",
    "https://[2001:4860:4860::8888]:8443/",
    "https://[::ffff:8.8.8.8]/",  # IPv4-mapped, of a public address
    "https://[64:ff9b::808:808]/",  # NAT64, of a public address
    "https://worker.example/" + "x" * (MAX_URL_LENGTH - len("https://worker.example/")),
]

LOCAL_DEVELOPMENT_URLS = [
    "http://localhost/hooks",
    "http://localhost:3000/hooks",
    "http://LOCALHOST:3000/",
    "https://localhost:8443/",
    "http://127.0.0.1:8080/hook",
    "http://127.0.0.0/",
    "http://127.0.0.42/",
    "http://127.0.0.255/",
    "https://127.0.0.1/",
    "http://[::1]:9000/hook",
    "https://[::1]/",
]


@pytest.mark.parametrize("url", PUBLIC_URLS)
@pytest.mark.parametrize("allow_local_http", [False, True])
def test_public_https_urls_are_accepted_unchanged(url: str, allow_local_http: bool) -> None:
    assert check_webhook_url(url, allow_local_http=allow_local_http) is url


@pytest.mark.parametrize("url", LOCAL_DEVELOPMENT_URLS)
def test_the_local_development_exception(url: str) -> None:
    assert check_webhook_url(url, allow_local_http=True) is url
    with pytest.raises(SubscriptionError) as refused:
        check_webhook_url(url, allow_local_http=False)
    assert refused.value.code == "WEBHOOK_URL_REJECTED"


# Refused whether or not local development is allowed; the fragment is part of the reason.
REFUSED_ALWAYS = [
    # scheme
    ("http://worker.example/hooks", "https"),
    ("http://8.8.8.8/", "https"),
    ("ftp://worker.example/", "https"),
    ("ws://worker.example/", "https"),
    ("file:///etc/passwd", "https"),
    ("gopher://localhost:70/", "https"),
    ("worker.example/hooks", "https"),
    ("//worker.example/hooks", "https"),
    # structure
    ("https:worker.example", "must name a host"),
    ("https://", "must name a host"),
    ("https:///hooks", "must name a host"),
    ("https://user@worker.example/", "credentials"),
    ("https://user:pass@worker.example/", "credentials"),
    ("https://:pass@worker.example/", "credentials"),
    ("https://worker.example@169.254.169.254/", "credentials"),
    ("https://worker.example/#frag", "fragment"),
    ("https://worker.example/#", "fragment"),
    ("https://worker.example:0/", "port"),
    ("https://worker.example:65536/", "port"),
    ("https://worker.example:99999/", "port"),
    ("https://worker.example:123456/", "malformed host or port"),
    ("https://worker.example:/", "malformed host or port"),
    ("https://worker.example:+443/", "malformed host or port"),
    ("https://worker.example:443:80/", "malformed host or port"),
    ("https://worker.example:http/", "malformed host or port"),
    ("https://:443/", "malformed host or port"),
    ("https://[::1/", "cannot be parsed"),
    # urlsplit checks the brackets' contents since Python 3.11.4; the host check otherwise
    ("https://[not-an-address]/", "cannot be parsed|malformed IPv6"),
    ("https://[127.0.0.1]/", "cannot be parsed|malformed IPv6"),
    ("https://[::1]x/", "malformed host or port"),
    # characters that parsers disagree on
    ("https://worker.exa\tmple/", "whitespace"),
    ("https://worker.example/\n", "whitespace"),
    ("https://worker.example /", "whitespace"),
    ("https://worker.example/a b", "whitespace"),
    ("https://worker.example\u3000/", "whitespace"),
    ("https://worker.example/\x00", "control"),
    ("https://worker.example/\x85", "control"),
    ("https://169.254.169.254\\.worker.example/", "'\\'"),
    ("https://worker.example\\@169.254.169.254/", "'\\'"),
    # host names
    ("https://exa%6dple.com/", "not a valid host name"),
    ("https://worker..example/", "not a valid host name"),
    ("https://-worker.example/", "not a valid host name"),
    ("https://worker-.example/", "not a valid host name"),
    ("https://worker.example../", "not a valid host name"),
    ("https://" + "a" * 64 + ".example/", "not a valid host name"),
    ("https://" + "a." * 127 + "example/", "not a valid host name"),
    ("https://b\u00fccher.example/", "ASCII"),
    ("https://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", "ASCII"),  # full-width 127.0.0.1
    ("https://intranet/", "fully qualified"),
    ("https://metadata/computeMetadata/v1/", "fully qualified"),
    ("https://foo.localhost/", "local host name"),
    ("http://foo.localhost/", "local host name"),
    ("https://localhost./", "local host name"),
    ("https://localhost.localdomain/", "local host name"),
    ("https://ip6-localhost/", "local host name"),
    ("https://ip6-loopback/", "local host name"),
    ("https://printer.local/", "local host name"),
    ("https://metadata.google.internal/", "local host name"),
    ("https://ip-10-0-0-1.ec2.internal/", "local host name"),
    ("https://box.localdomain/", "local host name"),
    ("https://nas.home.arpa/", "local host name"),
    # IPv4 addresses that are not public unicast
    ("https://10.0.0.1/", "private"),
    ("https://10.255.255.255/", "private"),
    ("https://172.16.0.1/", "private"),
    ("https://172.31.255.255/", "private"),
    ("https://192.168.1.1/", "private"),
    ("https://127.0.1.1/", "private"),  # loopback beyond the 127.0.0.x exception
    ("http://127.0.1.1/", "private"),
    ("https://127.255.255.254/", "private"),
    ("https://169.254.169.254/latest/meta-data/", "private"),
    ("https://169.254.170.2/v2/credentials", "private"),  # the ECS credentials endpoint
    ("https://169.254.0.1/", "private"),
    ("https://0.0.0.0/", "private"),
    ("https://0.1.2.3/", "private"),
    ("https://100.64.0.1/", "private"),
    ("https://100.127.255.254/", "private"),
    ("https://192.0.0.8/", "private"),
    ("https://192.0.2.10/", "private"),
    ("https://198.18.0.1/", "private"),
    ("https://198.51.100.7/", "private"),
    ("https://203.0.113.9/", "private"),
    ("https://224.0.0.1/", "private"),
    ("https://239.255.255.250/", "private"),
    ("https://240.0.0.1/", "private"),
    ("https://255.255.255.255/", "private"),
    # IPv6 addresses that are not public unicast
    ("https://[::]/", "private"),
    ("https://[fe80::1]/", "private"),
    ("https://[febf::1]/", "private"),
    ("https://[fe80::1%25eth0]/", "zone"),
    ("https://[fc00::1]/", "private"),
    ("https://[fd12:3456:789a::1]/", "private"),
    ("https://[fec0::1]/", "private"),
    ("https://[ff02::1]/", "private"),
    ("https://[ff0e::1]/", "private"),
    ("https://[2001:db8::1]/", "private"),
    ("https://[2001::1]/", "private"),  # Teredo, which embeds an IPv4 address
    ("https://[2002:7f00:1::]/", "private"),  # 6to4 of 127.0.0.1
    ("https://[2002:808:808::]/", "private"),  # 6to4 of a public address: refused whole
    ("https://[3fff::1]/", "private"),
    ("https://[100::1]/", "private"),
    ("https://[64:ff9b:1::a00:1]/", "private"),  # local-use NAT64
    # IPv4 addresses that are not public, inside IPv6 ones
    ("https://[::ffff:127.0.0.1]/", "private"),
    ("http://[::ffff:127.0.0.1]/", "private"),
    ("https://[::ffff:7f00:1]/", "private"),
    ("https://[::ffff:10.0.0.1]/", "private"),
    ("https://[::ffff:169.254.169.254]/", "private"),
    ("https://[::ffff:0.0.0.0]/", "private"),
    ("https://[::127.0.0.1]/", "private"),  # IPv4-compatible, deprecated
    ("https://[::a9fe:a9fe]/", "private"),
    ("https://[64:ff9b::a9fe:a9fe]/", "private"),  # NAT64 of the metadata service
    ("https://[64:ff9b::10.1.2.3]/", "private"),
    # IPv4 addresses spelled other than as a dotted quad
    ("http://2130706433/", "dotted quad"),
    ("https://2130706433/", "dotted quad"),
    ("https://0x7f000001/", "dotted quad"),
    ("https://0x7f.1/", "dotted quad"),
    ("https://0x7f.0x0.0x0.0x1/", "dotted quad"),
    ("https://127.1/", "dotted quad"),
    ("http://127.1/", "dotted quad"),
    ("https://127.0.1/", "dotted quad"),
    ("https://017700000001/", "dotted quad"),
    ("https://0177.0.0.1/", "dotted quad"),
    ("https://010.0.0.1/", "dotted quad"),
    ("https://127.000.000.001/", "dotted quad"),
    ("https://08.8.8.8/", "dotted quad"),
    ("https://169.254.43518/", "dotted quad"),
    ("https://2852039166/", "dotted quad"),  # 169.254.169.254
    ("https://0/", "dotted quad"),
    ("https://0x/", "dotted quad"),
    ("https://4294967296/", "dotted quad"),
    ("https://1.2.3.4.5/", "dotted quad"),
    ("https://8.8.8.8./", "dotted quad"),
    ("https://256.0.0.1/", "dotted quad"),
    ("https://worker.example.123/", "dotted quad"),  # a numeric last label is an address
    # size
    ("https://worker.example/" + "x" * MAX_URL_LENGTH, "2048"),
    ("", "non-empty"),
]


@pytest.mark.parametrize(("url", "why"), REFUSED_ALWAYS)
@pytest.mark.parametrize("allow_local_http", [False, True])
def test_refused_urls(url: str, why: str, allow_local_http: bool) -> None:
    with pytest.raises(SubscriptionError) as refused:
        check_webhook_url(url, allow_local_http=allow_local_http)
    assert refused.value.status == 400
    assert refused.value.code == "WEBHOOK_URL_REJECTED"
    assert any(reason in refused.value.message for reason in why.split("|"))


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://localhost/", "local host name"),
        ("https://localhost/", "local host name"),
        ("https://LocalHost:8443/", "local host name"),
        ("http://127.0.0.1/", "private"),
        ("https://127.0.0.1/", "private"),
        ("https://[::1]/", "private"),
        ("http://[::1]/", "private"),
    ],
)
def test_local_targets_are_refused_in_production(url: str, why: str) -> None:
    with pytest.raises(SubscriptionError) as refused:
        check_webhook_url(url, allow_local_http=False)
    assert why in refused.value.message


def test_development_allows_http_only_to_local_targets() -> None:
    with pytest.raises(SubscriptionError) as refused:
        check_webhook_url("http://worker.example/", allow_local_http=True)
    assert "http is allowed only for localhost and 127.0.0.x" in refused.value.message


@pytest.mark.parametrize("value", [None, 42, b"https://worker.example/"])
def test_a_url_that_is_not_a_string_is_refused(value: object) -> None:
    with pytest.raises(SubscriptionError):
        check_webhook_url(value, allow_local_http=True)  # type: ignore[arg-type]


def test_the_error_body() -> None:
    with pytest.raises(SubscriptionError) as refused:
        check_webhook_url("https://10.0.0.1/", allow_local_http=False)
    body = refused.value.body()
    assert body == {"error": {"code": "WEBHOOK_URL_REJECTED", "message": refused.value.message}}
    extra = SubscriptionError(409, "ALREADY_CLAIMED", "claimed", {"current_holder": "w-2"})
    assert extra.body() == {
        "error": {"code": "ALREADY_CLAIMED", "message": "claimed", "current_holder": "w-2"}
    }


ALLOWED_ADDRESSES = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",  # just below carrier-grade NAT
    "100.128.0.0",  # just above it
    "172.15.255.255",  # just below 172.16/12
    "172.32.0.0",  # just above it
    "169.253.255.255",
    "223.255.255.255",  # the last unicast address before multicast
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
]

REFUSED_ADDRESSES = [
    "10.0.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.0.1",
    "169.254.169.254",
    "169.254.170.2",
    "0.0.0.0",
    "100.64.0.1",
    "192.0.0.8",
    "192.0.2.1",
    "192.88.99.1",
    "198.18.0.1",
    "224.0.0.251",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "::",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "fd00:ec2::254",  # the instance metadata service over IPv6
    "fec0::1",
    "ff02::1",
    "2001:db8::1",
    "2001::1",
    "2002:7f00:1::",
    "64:ff9b:1::1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "::a9fe:a9fe",
    # not addresses at all
    "",
    "localhost",
    "worker.example",
    "127.1",
    "2130706433",
    "0x7f.0.0.1",
    "010.0.0.1",
    " 8.8.8.8",
    "8.8.8.8 ",
    "8.8.8.8/32",
    "[::1]",
    "::1::1",
]

LOOPBACK_ADDRESSES = ["127.0.0.1", "127.0.0.53", "127.255.255.254", "::1", "::ffff:127.0.0.1"]


@pytest.mark.parametrize("address", ALLOWED_ADDRESSES)
@pytest.mark.parametrize("allow_local_http", [False, True])
def test_public_unicast_addresses_are_allowed(address: str, allow_local_http: bool) -> None:
    assert address_allowed(address, allow_local_http=allow_local_http) is True


@pytest.mark.parametrize("address", REFUSED_ADDRESSES)
@pytest.mark.parametrize("allow_local_http", [False, True])
def test_other_addresses_are_refused(address: str, allow_local_http: bool) -> None:
    assert address_allowed(address, allow_local_http=allow_local_http) is False


@pytest.mark.parametrize("address", LOOPBACK_ADDRESSES)
def test_loopback_only_in_development(address: str) -> None:
    assert address_allowed(address, allow_local_http=True) is True
    assert address_allowed(address, allow_local_http=False) is False


@pytest.mark.parametrize("value", [None, 2130706433, b"8.8.8.8", ipaddress.ip_address("8.8.8.8")])
def test_address_allowed_takes_only_strings(value: object) -> None:
    assert address_allowed(value, allow_local_http=True) is False  # type: ignore[arg-type]


def test_a_literal_address_in_a_url_is_judged_as_delivery_judges_it() -> None:
    """Creation and delivery must not disagree on an address: whatever a URL may name, its
    connection may reach, and the other way round."""
    for address in ALLOWED_ADDRESSES + REFUSED_ADDRESSES + LOOPBACK_ADDRESSES:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            continue
        if ip.version == 6 and ip.scope_id:
            continue
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        try:
            check_webhook_url(f"https://{host}/", allow_local_http=False)
        except SubscriptionError:
            accepted = False
        else:
            accepted = True
        assert accepted is address_allowed(str(ip), allow_local_http=False), address


def test_every_ipv4_special_range_is_refused_at_its_edges() -> None:
    for network in _urls._BLOCKED_V4:
        for ip in (network.network_address, network.broadcast_address):
            assert not address_allowed(str(ip), allow_local_http=False), ip
            assert not address_allowed(f"::ffff:{ip}", allow_local_http=False), ip
            assert not address_allowed(f"64:ff9b::{ip}", allow_local_http=False), ip


def test_resolving_localhost_needs_the_development_exception() -> None:
    assert resolve_allowed("localhost", 8080, allow_local_http=True) is True
    assert resolve_allowed("localhost", 8080, allow_local_http=False) is False
    assert set(allowed_addresses("localhost", 8080, allow_local_http=True) or []) <= {
        "127.0.0.1",
        "::1",
    }


@pytest.mark.parametrize(
    ("host", "allowed"),
    [("8.8.8.8", True), ("2606:4700:4700::1111", True), ("10.0.0.1", False), ("::1", False)],
)
def test_resolving_a_literal_address(host: str, allowed: bool) -> None:
    assert resolve_allowed(host, 443, allow_local_http=False) is allowed


def _answers(*addresses: str) -> list[tuple[object, ...]]:
    return [
        (
            socket.AF_INET6 if ":" in address else socket.AF_INET,
            socket.SOCK_STREAM,
            6,
            "",
            (address, 443, 0, 0) if ":" in address else (address, 443),
        )
        for address in addresses
    ]


def test_one_private_answer_refuses_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebinding name answers with a public and a private address: the client might connect
    to either."""
    monkeypatch.setattr(
        _urls.socket, "getaddrinfo", lambda *args, **kwargs: _answers("8.8.8.8", "10.0.0.7")
    )
    assert resolve_allowed("rebind.example", 443, allow_local_http=True) is False
    assert allowed_addresses("rebind.example", 443, allow_local_http=True) is None


@pytest.mark.parametrize("host", ["hooks.attacker.example", "127.0.0.1.nip.example"])
def test_only_the_development_hosts_may_resolve_to_loopback(
    monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    """With the development exception on, a public name whose answer is 127.x (a rebinding
    name aimed at the server's neighbours) is still refused; localhost and 127.0.0.x are not."""
    monkeypatch.setattr(_urls.socket, "getaddrinfo", lambda *args, **kwargs: _answers("127.0.0.1"))
    assert allowed_addresses(host, 6379, allow_local_http=True) is None
    for development in ("localhost", "127.0.0.1", "127.0.0.9", "::1"):
        assert allowed_addresses(development, 8080, allow_local_http=True) == ["127.0.0.1"]
    assert allowed_addresses("127.0.1.1", 8080, allow_local_http=True) is None


def test_the_allowed_answers_are_returned_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = _answers("8.8.8.8", "2606:4700:4700::1111", "8.8.8.8")
    monkeypatch.setattr(_urls.socket, "getaddrinfo", lambda *args, **kwargs: answers)
    assert resolve_allowed("worker.example", 443, allow_local_http=False) is True
    assert allowed_addresses("worker.example", 443, allow_local_http=False) == [
        "8.8.8.8",
        "2606:4700:4700::1111",
    ]


@pytest.mark.parametrize(
    "failure",
    [socket.gaierror(socket.EAI_NONAME, "no such name"), OSError("down"), UnicodeError("idna")],
)
def test_a_name_that_does_not_resolve_is_refused(
    monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    def fail(*args: object, **kwargs: object) -> object:
        raise failure

    monkeypatch.setattr(_urls.socket, "getaddrinfo", fail)
    assert resolve_allowed("worker.example", 443, allow_local_http=True) is False


def test_no_answers_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_urls.socket, "getaddrinfo", lambda *args, **kwargs: [])
    assert resolve_allowed("worker.example", 443, allow_local_http=True) is False
