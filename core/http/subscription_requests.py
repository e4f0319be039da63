"""Turning the control API's request bodies and headers into the values the subscription
service takes; a malformed request is refused here, 400 INVALID_REQUEST, before the service
is called. (A PUT's configuration is `subscriptions.parse_config`.)"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import ProtocolError
from ..protocol.offsets import parse_offset
from ..subscriptions import Ack, Completion, WakeFence
from ..subscriptions.config import is_text, parse_json_object, parse_stream_list
from ..subscriptions.errors import invalid
from ..subscriptions.rules import MAX_ACKS, parse_acks

MAX_WORKER_CHARS = 256


def parse_added_streams(body: bytes) -> tuple[str, ...]:
    """The paths of a POST .../streams: {"streams": [paths]}."""
    document = parse_json_object(body)
    if set(document) != {"streams"}:
        raise invalid('the body must be {"streams": [paths]}')
    return parse_stream_list(document["streams"])


def parse_worker(body: bytes) -> str:
    """The worker a claim is for: {"worker": name}."""
    worker = parse_json_object(body).get("worker")
    if (
        not isinstance(worker, str)
        or not 0 < len(worker) <= MAX_WORKER_CHARS
        or not is_text(worker)
    ):
        raise invalid(f"worker must be a name of 1 to {MAX_WORKER_CHARS} characters")
    return worker


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (None: no such header)."""
    scheme, _, text = (authorization or "").partition(" ")
    return text.strip() if scheme.lower() == "bearer" else None


def parse_fence(document: dict[str, Any]) -> WakeFence:
    """The wake a callback, ack or release names, as sent: checked against the token and the
    current wake by the service."""
    return WakeFence(document.get("generation"), document.get("wake_id"))


def parse_completion(document: dict[str, Any]) -> Completion:
    """A callback's or ack's `done` and `acks` (judged once its token has been checked)."""
    done = document.get("done", False)
    if not isinstance(done, bool):
        raise invalid("done must be true or false")
    acks = tuple(Ack(path, *_position(offset)) for path, offset in parse_acks(document.get("acks")))
    if len(acks) > MAX_ACKS:
        raise invalid(f"at most {MAX_ACKS} acks per request")
    return Completion(done, acks)


def _position(offset: str) -> tuple[int, bool, bool]:
    """The byte position an acked offset names, whether it names it exactly (`_i`), and
    whether it is a compacted stream's snapshot of the history below it (`_s`)."""
    try:
        parsed = parse_offset(offset)
    except ProtocolError as exc:
        raise invalid(exc.message) from exc
    return parsed.at, parsed.exact, parsed.snapshot
