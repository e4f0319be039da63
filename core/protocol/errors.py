"""Typed request errors raised by the parsers; the HTTP layer turns them into responses."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ProtocolError(Exception):
    """A request that cannot be served, with the status and headers the client should see."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


def bad_request(message: str) -> ProtocolError:
    return ProtocolError(400, message)


def quoted(value: str, limit: int = 40) -> str:
    """A client's value, quoted for an error message and cut short: error bodies stay small
    whatever the request carried."""
    text = value if len(value) <= limit else value[:limit] + "..."
    return repr(text)
