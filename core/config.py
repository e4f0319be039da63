"""Server settings. Every field can be set by an environment variable prefixed `DS_`
(for example `DS_LONG_POLL_TIMEOUT=15`); that is how the Lambda function is configured."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MIB = 1024 * 1024


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DS_", extra="ignore")

    table: str = "durable-streams"
    bucket: str = "durable-streams-data"
    region: str | None = None
    base_path: str = "/v1/stream"

    long_poll_timeout: float = Field(15.0, ge=0, description="seconds a long-poll may wait")
    poll_interval: float = Field(0.2, gt=0, description="seconds between tail checks")
    max_read_bytes: int = Field(1 * MIB, gt=0, description="largest read response body")
    max_append_bytes: int = Field(4 * MIB, gt=0, description="largest accepted request body")
    inline_max_bytes: int = Field(64 * 1024, gt=0, le=200 * 1024)
    ttl_renew_fraction: float = Field(0.1, gt=0, le=1)
    write_deadline: float = Field(10.0, gt=0, description="seconds to win a contended write")

    sse_mode: Literal["stream", "window"] = Field(
        default_factory=lambda: (
            "window" if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") else "stream"
        ),
        description="stream under uvicorn; window for buffered hosts (chosen inside Lambda)",
    )
    sse_lifetime: float = Field(60.0, gt=0, description="seconds before an SSE stream ends")
    sse_window: float | None = Field(
        None, gt=0, description="bounded-window wait in seconds (default: long_poll_timeout)"
    )

    cache_visibility: Literal["public", "private"] = "public"
    cache_max_age: int = 60
    stale_while_revalidate: int = 300
    retry_after_seconds: int = 1
