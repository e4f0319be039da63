"""Parsing a subscription's configuration (PUT body) and its idempotency hash."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from ..protocol.errors import ProtocolError
from ..protocol.paths import parse_stream_path
from ._glob import check_pattern
from ._urls import check_webhook_url
from .errors import SubscriptionError, invalid
from .model import Delivery, SubscriptionConfig

DEFAULT_LEASE_TTL_MS = 30_000
MIN_LEASE_TTL_MS = 1_000
MAX_LEASE_TTL_MS = 600_000
MAX_EXPLICIT_STREAMS = 1_000
# The explicit paths' UTF-8 bytes, in a PUT and in all (a PUT's plus those added): with the
# wake snapshot's 64 KiB they keep a subscription's item far below DynamoDB's 400 KB.
MAX_EXPLICIT_BYTES = 64 * 1024
MAX_ALL_EXPLICIT_BYTES = 128 * 1024
MAX_DESCRIPTION_CHARS = 1_000
MAX_ID_BYTES = 256
_FIELDS = {"type", "pattern", "streams", "webhook", "wake_stream", "lease_ttl_ms", "description"}


def parse_subscription_id(value: str) -> str:
    if not is_text(value) or "\ufffd" in value:
        raise invalid("a subscription id must be valid UTF-8 once percent-decoded")
    if not value or len(value.encode()) > MAX_ID_BYTES or "/" in value:
        raise invalid(f"a subscription id is 1 to {MAX_ID_BYTES} bytes without '/'")
    if any(ord(c) < 0x20 or c == "\x7f" for c in value):
        raise invalid("a subscription id must not contain control characters")
    return value


def is_text(value: str) -> bool:
    """Whether `value` can be written as UTF-8 (no lone surrogates from a JSON escape)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def explicit_bytes(paths: Iterable[str]) -> int:
    return sum(len(path.encode()) for path in paths)


def parse_json_object(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise invalid("the body must be a JSON object") from exc
    if not isinstance(document, dict):
        raise invalid("the body must be a JSON object")
    return document


def parse_config(body: bytes, *, allow_local_http: bool) -> SubscriptionConfig:
    document = parse_json_object(body)
    unknown = set(document) - _FIELDS
    if unknown:
        raise invalid(f"unknown fields: {', '.join(sorted(unknown))}")
    kind = document.get("type")
    if kind not in {d.value for d in Delivery}:
        raise invalid('type must be "webhook" or "pull-wake"')
    delivery = Delivery(kind)
    pattern = document.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise invalid("pattern must be a string")
        check_pattern(pattern)
    streams = parse_stream_list(document.get("streams", []))
    if pattern is None and not streams:
        raise invalid("a subscription needs a pattern, streams, or both")
    webhook_url = _webhook_url(document.get("webhook"), delivery, allow_local_http)
    wake_stream = _wake_stream(document.get("wake_stream"), delivery)
    lease = document.get("lease_ttl_ms", DEFAULT_LEASE_TTL_MS)
    if isinstance(lease, bool) or not isinstance(lease, int):
        raise invalid("lease_ttl_ms must be an integer")
    if not MIN_LEASE_TTL_MS <= lease <= MAX_LEASE_TTL_MS:
        raise invalid(f"lease_ttl_ms must be {MIN_LEASE_TTL_MS} to {MAX_LEASE_TTL_MS}")
    description = document.get("description")
    if description is not None and (
        not isinstance(description, str)
        or len(description) > MAX_DESCRIPTION_CHARS
        or not is_text(description)
    ):
        raise invalid(f"description must be a string of at most {MAX_DESCRIPTION_CHARS} chars")
    return SubscriptionConfig(
        delivery, pattern, streams, webhook_url, wake_stream, lease, description
    )


def parse_stream_list(value: object) -> tuple[str, ...]:
    """Explicit stream paths: validated, sorted, without repeats."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise invalid("streams must be an array of stream paths")
    if len(value) > MAX_EXPLICIT_STREAMS:
        raise invalid(f"at most {MAX_EXPLICIT_STREAMS} explicit streams")
    paths = tuple(sorted({stream_path(item) for item in value}))
    if explicit_bytes(paths) > MAX_EXPLICIT_BYTES:
        raise invalid(f"explicit stream paths may add up to {MAX_EXPLICIT_BYTES} bytes")
    return paths


def stream_path(value: str) -> str:
    """A stream-root-relative path, refused in the subscription error shape."""
    try:
        return parse_stream_path(value)
    except ProtocolError as exc:
        raise invalid(exc.message) from exc


def _webhook_url(value: object, delivery: Delivery, allow_local_http: bool) -> str | None:
    if delivery is not Delivery.WEBHOOK:
        if value is not None:
            raise invalid("webhook is only for webhook subscriptions")
        return None
    if not isinstance(value, dict) or set(value) != {"url"} or not isinstance(value["url"], str):
        raise invalid('a webhook subscription needs webhook: {"url": "https://..."}')
    if not is_text(value["url"]):
        raise invalid("the webhook URL must be valid UTF-8")
    return check_webhook_url(value["url"], allow_local_http=allow_local_http)


def _wake_stream(value: object, delivery: Delivery) -> str | None:
    if delivery is not Delivery.PULL_WAKE:
        if value is not None:
            raise invalid("wake_stream is only for pull-wake subscriptions")
        return None
    if not isinstance(value, str):
        raise invalid("a pull-wake subscription needs wake_stream, a stream path")
    return stream_path(value)


def config_hash(config: SubscriptionConfig) -> str:
    """The digest a re-confirming PUT must match: every field, defaults applied."""
    canonical = {
        "type": config.delivery.value,
        "pattern": config.pattern,
        "streams": list(config.streams),
        "webhook": {"url": config.webhook_url} if config.webhook_url else None,
        "wake_stream": config.wake_stream,
        "lease_ttl_ms": config.lease_ttl_ms,
        "description": config.description,
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


__all__ = ["SubscriptionError", "config_hash", "parse_config", "parse_subscription_id"]
