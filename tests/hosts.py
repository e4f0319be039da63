"""The two hosts the app runs under, driven the same way by tests.

`AsgiHost` sends real HTTP requests to the app (repeated headers arrive repeated, as under
uvicorn). `LambdaHost` turns each request into the event a Lambda Function URL delivers
(repeated headers joined with commas, binary bodies base64-encoded) and runs it through
Mangum configured as `functions.api` configures it; it keeps the raw Lambda answer, so tests
can measure what would cross the front door.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import Any, Protocol

from mangum import Mangum
from starlette.testclient import TestClient

from durable_streams_aws.core.http.envelope import TEXT_MIME_TYPES
from durable_streams_aws.infra.lambda_bridge import LambdaContext, function_url_event

Headers = list[tuple[str, str]]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes
    lambda_payload: dict[str, Any] | None = None  # what a Lambda host returned, as is

    def json(self) -> Any:
        return json.loads(self.body)


class Host(Protocol):
    name: str

    def request(
        self, method: str, target: str, headers: Headers | None = None, body: bytes = b""
    ) -> Answer: ...


class AsgiHost:
    name = "uvicorn"

    def __init__(self, app: Any) -> None:
        self.client = TestClient(app, base_url="http://streams.test")

    def request(
        self, method: str, target: str, headers: Headers | None = None, body: bytes = b""
    ) -> Answer:
        raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers or []]
        response = self.client.request(method, target, headers=raw, content=body)
        return Answer(
            response.status_code,
            {k.lower(): v for k, v in response.headers.items()},
            response.content,
        )

    def close(self) -> None:
        self.client.close()


class LambdaHost:
    name = "lambda"

    def __init__(self, app: Any) -> None:
        self.handler = Mangum(app, lifespan="off", text_mime_types=list(TEXT_MIME_TYPES))

    def request(
        self, method: str, target: str, headers: Headers | None = None, body: bytes = b""
    ) -> Answer:
        named = list(headers or [])
        if not any(name.lower() == "host" for name, _ in named):
            named.insert(0, ("host", "streams.test"))
        event = function_url_event(method, target, named, body, "127.0.0.1")
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            payload = self.handler(event, LambdaContext())
        finally:
            loop.close()
            asyncio.set_event_loop(None)
        text = payload.get("body") or ""
        data = base64.b64decode(text) if payload.get("isBase64Encoded") else text.encode()
        headers_out = {k.lower(): v for k, v in (payload.get("headers") or {}).items()}
        return Answer(int(payload["statusCode"]), headers_out, data, payload)

    def close(self) -> None:
        pass


def lambda_payload_bytes(answer: Answer) -> int:
    """The size of a Lambda answer as the runtime serialises it (JSON, ASCII escapes)."""
    assert answer.lambda_payload is not None
    return len(json.dumps(answer.lambda_payload))


def lambda_body_bytes(answer: Answer) -> int:
    """The size of the body alone inside that payload."""
    assert answer.lambda_payload is not None
    return len(json.dumps(answer.lambda_payload.get("body") or "")) - 2
