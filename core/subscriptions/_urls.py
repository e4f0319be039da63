"""Webhook URLs: which targets the server may be asked to call (PROTOCOL 6.2, 12.8).

The server POSTs to whatever URL a subscription names, from inside its network, so a URL that
reaches the cloud metadata service or a private address would let anyone who may create a
subscription probe or call internal services (SSRF). `check_webhook_url` refuses such URLs when
a subscription is created; it can judge only what the URL says, so delivery checks what the
name resolves to again, just before each request (`allowed_addresses`), which also defeats a
name that resolved to a public address at creation and to a private one later (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from .errors import SubscriptionError

MAX_URL_LENGTH = 2048

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# The IANA special-purpose ranges that are not public unicast, listed here rather than taken
# from `ipaddress.is_global` alone: that property has changed between Python patch releases and
# calls multicast and several special ranges global.
_BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(network)
    for network in (
        "0.0.0.0/8",  # "this network", and 0.0.0.0 reaches the local host
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT, private to the provider
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, including the metadata service 169.254.169.254
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",
        "192.88.99.0/24",  # deprecated 6to4 relays
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
    )
)
# Public IPv6 unicast is 2000::/3; within it these are not reachable public hosts. 2002::/16
# (6to4) embeds an IPv4 address and is deprecated (RFC 7526): refused whole rather than
# unwrapped.
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_BLOCKED_V6 = tuple(
    ipaddress.IPv6Network(network)
    for network in ("2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20")
)
# NAT64 (RFC 6052): the last 32 bits are the IPv4 address that is actually reached, which may be
# private, so it is judged instead.
_NAT64_V6 = ipaddress.IPv6Network("64:ff9b::/96")
# The development exception of PROTOCOL 6.2 names http://127.0.0.x, not all of 127/8.
_DEV_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/24")
_DEV_LOOPBACK_V6 = ipaddress.IPv6Address("::1")
_DEV_NAME = "localhost"

# Names that resolve to the local host or stay inside a site: refused by name, since delivery
# would otherwise find out only from the resolved address (and a local resolver could answer
# anything for them).
_LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")

# Host and optional port of an authority without userinfo; the host checks come after.
_AUTHORITY = re.compile(r"(?P<host>\[[^\[\]]*\]|[^:\[\]@]+)(?::(?P<port>[0-9]{1,5}))?")
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# A host whose last label is a number is an IPv4 address to a WHATWG URL parser (and to
# inet_aton), however it is spelled: `2130706433`, `0x7f.1`, `127.1`.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


def check_webhook_url(url: str, *, allow_local_http: bool) -> str:
    """The URL unchanged, or WEBHOOK_URL_REJECTED saying why the server will not call it."""
    if not isinstance(url, str) or not url:
        raise _rejected("webhook URL must be a non-empty string")
    if len(url) > MAX_URL_LENGTH:
        raise _rejected(f"webhook URL must be at most {MAX_URL_LENGTH} characters")
    # urlsplit silently drops tabs and newlines, and HTTP clients differ on backslashes: the URL
    # checked must be the URL called.
    if any(c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c == "\\" for c in url):
        raise _rejected("webhook URL must not contain whitespace, control characters or '\\'")
    if "#" in url:
        raise _rejected("webhook URL must not have a fragment")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise _rejected("webhook URL cannot be parsed") from None
    if parts.scheme not in {"https", "http"}:
        raise _rejected("webhook URL must use https")
    if not parts.netloc:
        raise _rejected("webhook URL must name a host")
    if "@" in parts.netloc:
        raise _rejected("webhook URL must not contain credentials")
    authority = _AUTHORITY.fullmatch(parts.netloc)
    if authority is None:
        raise _rejected("webhook URL has a malformed host or port")
    port = authority["port"]
    if port is not None and not 1 <= int(port) <= 65535:
        raise _rejected("webhook URL port must be 1 to 65535")
    host = authority["host"].lower()
    local = _check_host(host, allow_local_http=allow_local_http)
    if parts.scheme == "http" and not local:
        raise _rejected(
            "webhook URL must use https"
            + (" (http is allowed only for localhost and 127.0.0.x)" if allow_local_http else "")
        )
    return url


def address_allowed(address: str, *, allow_local_http: bool) -> bool:
    """Whether the server may connect to this resolved IP address: public unicast only, and
    loopback when local development is allowed."""
    if not isinstance(address, str):
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return _ip_allowed(ip, allow_loopback=allow_local_http)


def allowed_addresses(host: str, port: int, *, allow_local_http: bool) -> list[str] | None:
    """The addresses the name resolves to, if every one of them is allowed; None if it does
    not resolve or any is not. Connecting to one of these, rather than resolving again, leaves
    no window in which the name can change to a private address."""
    # Loopback only for the hosts the development exception names: any other name that
    # resolves to 127.0.0.1 reaches the server's own neighbours, on any port.
    loopback = allow_local_http and _is_development_host(host.lower())
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError, TypeError):
        return None
    addresses: list[str] = []
    for _family, _type, _proto, _canonname, sockaddr in answers:
        address = sockaddr[0]
        if not isinstance(address, str) or not address_allowed(address, allow_local_http=loopback):
            return None
        if address not in addresses:
            addresses.append(address)
    return addresses or None


def resolve_allowed(host: str, port: int, *, allow_local_http: bool) -> bool:
    """Whether the name resolves, and only to addresses the server may connect to."""
    return allowed_addresses(host, port, allow_local_http=allow_local_http) is not None


def _is_development_host(host: str) -> bool:
    """`localhost`, `127.0.0.x` or `::1` (brackets removed): the development exception."""
    if host == _DEV_NAME:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip == _DEV_LOOPBACK_V6 or ip in _DEV_LOOPBACK_V4


def _check_host(host: str, *, allow_local_http: bool) -> bool:
    """Refuses a host the server must not call; True when it is allowed only as the local
    development exception (which may then use http)."""
    if host.startswith("["):
        return _check_ipv6_literal(host[1:-1], allow_local_http=allow_local_http)
    if not host.isascii():
        raise _rejected("webhook URL host must be ASCII (write an internationalized name as xn--)")
    if _is_ipv4_spelling(host):
        try:
            ip = ipaddress.IPv4Address(host)
        except ValueError:
            raise _rejected("webhook URL IPv4 address must be a plain dotted quad") from None
        if allow_local_http and ip in _DEV_LOOPBACK_V4:
            return True
        if not _ip_allowed(ip, allow_loopback=False):
            raise _rejected("webhook URL must not target a private, local or reserved address")
        return False
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise _rejected("webhook URL host is not a valid host name")
    if host == _DEV_NAME and allow_local_http:
        return True
    if name in _LOCAL_NAMES or name.endswith(_LOCAL_SUFFIXES):
        raise _rejected("webhook URL must not target a local host name")
    if "." not in name:
        # A single label is completed from the resolver's search domains: inside a VPC that
        # reaches internal hosts.
        raise _rejected("webhook URL host must be a fully qualified domain name")
    return False


def _check_ipv6_literal(text: str, *, allow_local_http: bool) -> bool:
    if "%" in text:
        raise _rejected("webhook URL must not use an IPv6 zone identifier")
    try:
        ip = ipaddress.IPv6Address(text)
    except ValueError:
        raise _rejected("webhook URL has a malformed IPv6 address") from None
    if allow_local_http and ip == _DEV_LOOPBACK_V6:
        return True
    if not _ip_allowed(ip, allow_loopback=False):
        raise _rejected("webhook URL must not target a private, local or reserved address")
    return False


def _is_ipv4_spelling(host: str) -> bool:
    labels = (host[:-1] if host.endswith(".") else host).split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return True
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


def _ip_allowed(ip: _IPAddress, *, allow_loopback: bool) -> bool:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id is not None:
            return False  # only link-local addresses need a zone
        embedded = ip.ipv4_mapped or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64_V6 else None
        )
        if embedded is not None:
            return _ip_allowed(embedded, allow_loopback=allow_loopback)
        if ip == _DEV_LOOPBACK_V6:
            return allow_loopback
        if ip not in _GLOBAL_UNICAST_V6 or any(ip in network for network in _BLOCKED_V6):
            return False
    else:
        if ip.is_loopback:
            return allow_loopback
        if any(ip in network for network in _BLOCKED_V4):
            return False
    # Ranges registered after the lists above were written, as far as this Python knows them.
    return ip.is_global and not ip.is_multicast


def _rejected(reason: str) -> SubscriptionError:
    return SubscriptionError(400, "WEBHOOK_URL_REJECTED", reason)
