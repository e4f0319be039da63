"""Lambda's side of a Function URL invocation: the event (payload 2.0) it delivers for an HTTP
request, and the context object it passes with it. The local Lambda bridge builds every request
from them, and the API function's warm-up its own first requests."""

from __future__ import annotations

import base64
import os
import time
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlsplit

_TEXT_TYPES = ("text/", "application/json", "application/x-www-form-urlencoded")


class LambdaContext:
    """The attributes Powertools and Mangum read from a Lambda context."""

    def __init__(self, timeout_seconds: float = 30.0) -> None:
        self.aws_request_id = str(uuid.uuid4())
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "dsaws-bridge")
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"
        )
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def function_url_event(
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    source_ip: str,
    scheme: str = "https",
) -> dict[str, Any]:
    split = urlsplit(target)
    joined: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    joined.setdefault("host", "localhost")  # a Function URL always names its own domain
    # A Function URL says how the client reached it (always https there); the app builds the
    # URLs it hands out (Location, subscription callbacks) with it.
    joined["x-forwarded-proto"] = scheme
    query: dict[str, str] = {}
    for key, value in parse_qsl(split.query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    content_type = joined.get("content-type", "")
    is_text = content_type.startswith(_TEXT_TYPES) and _is_utf8(body)
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": split.path,
        "rawQueryString": split.query,
        "headers": joined,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "bridge",
            "domainName": joined.get("host", "localhost"),
            "domainPrefix": "bridge",
            "http": {
                "method": method,
                "path": split.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": joined.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": bool(body) and not is_text,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if body:
        event["body"] = body.decode("utf-8") if is_text else base64.b64encode(body).decode()
    return event


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
