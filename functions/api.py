"""The API function: the FastAPI app behind Mangum, configured by `DS_` variables."""

from __future__ import annotations

from mangum import Mangum

from core.config import Settings
from core.runtime import build_backend

_backend = build_backend(Settings())
handler = Mangum(_backend.app(), lifespan="off")
