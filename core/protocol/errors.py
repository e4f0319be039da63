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
