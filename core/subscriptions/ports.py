"""What the subscription service needs from outside it, as types: the streams, the keys, the
webhook POST (the scheduler's port is `tasks.Scheduler`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..storage.model import StreamPage

if TYPE_CHECKING:  # cryptography loads with the keys, on first use: not on a cold start
    from ._signing import SigningKey
    from ._tokens import TokenSigner


class StreamPort(Protocol):
    """The stream store as the subscriptions use it: a listing for backfill and checks, and
    appending wake events (straight to the store: a wake event wakes no subscription)."""

    def list_streams(self, prefix: str, cursor: str | None, page_items: int) -> StreamPage:
        """One page of the stream paths starting with `prefix`, after `cursor`."""
        ...

    def append_json(self, path: str, event: dict[str, Any]) -> bool:
        """Append `event` as one JSON message; False when the stream is missing or closed."""
        ...


@dataclass(frozen=True)
class Keys:
    """The webhook signing key (public half in the JWKS) and the token key, from one secret."""

    signing: SigningKey
    tokens: TokenSigner


@dataclass(frozen=True)
class Sent:
    """What a webhook POST came to: `done` when it answered {"done": true}."""

    ok: bool
    done: bool = False
    detail: str = ""


# (url, body, headers, timeout in seconds) -> what came of it; never raises for the receiver.
WebhookPost = Callable[[str, bytes, dict[str, str], float], Sent]
