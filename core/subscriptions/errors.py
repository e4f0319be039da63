"""The one error type of the subscription APIs; the HTTP layer turns it into a response."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SubscriptionError(Exception):
    """A subscription request that cannot be served. `code` is the machine-readable name that
    clients branch on (the protocol fixes some, such as `FENCED` and `ALREADY_CLAIMED`), and
    `extra` carries the fields the protocol puts next to it, such as `current_holder`."""

    status: int
    code: str
    message: str
    extra: dict[str, object] = field(default_factory=dict)

    def body(self) -> dict[str, object]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


def invalid(message: str) -> SubscriptionError:
    return SubscriptionError(400, "INVALID_REQUEST", message)
