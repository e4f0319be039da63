"""The scheduled collector function: removes data of deleted and expired streams."""

from __future__ import annotations

from typing import Any

from core.config import Settings
from core.runtime import build_backend
from core.storage import Collector

_backend = build_backend(Settings())


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    return Collector(_backend.store).run().as_dict()
