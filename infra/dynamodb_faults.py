"""Faults DynamoDB answers and neither local emulator does, injected into a client's requests:
whatever the DynamoDB behind it (moto's or DynamoDB Local), the store meets them as it would
on AWS.

- **Transaction conflicts.** A `TransactWriteItems` touching an item another transaction is
  writing is cancelled, `TransactionCanceledException` with `TransactionConflict` as the
  reason of that item (`None` for the others); a `PutItem`, `UpdateItem` or `DeleteItem` on
  such an item fails with `TransactionConflictException`. Nothing is applied.
- **Throttling**: `ThrottlingException`, nothing applied.
- **Server errors**: 500 `InternalServerError`, nothing applied.
- **Applied, then a server error**: the request is applied and its answer lost (500). A
  transaction retried with the same `ClientRequestToken` then succeeds without being applied
  again, as DynamoDB's idempotent transactions do (for ten minutes); a single-item write retried
  is applied again, as on DynamoDB.

    faults = DynamoFaults(FaultRates(conflict=0.05, throttle=0.01), seed=7)
    faults.attach(dynamodb_client)   # a botocore `before-send` handler
    faults.injected                  # Counter of what it answered, by fault
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.httpsession import URLLib3Session

_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
_SINGLE_ITEM_WRITES = {"PutItem", "UpdateItem", "DeleteItem"}
_PREFIX = "com.amazonaws.dynamodb.v20120810#"


@dataclass(frozen=True)
class FaultRates:
    """The share of requests answered with each fault (conflicts: of item writes only)."""

    conflict: float = 0.0
    throttle: float = 0.0
    server_error: float = 0.0
    applied_then_server_error: float = 0.0


class _Body:
    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self, **_: Any) -> Any:
        yield self.read()

    def read(self, *_: Any) -> bytes:
        content, self._content = self._content, b""
        return content


def _answer(url: str, status: int, code: str, message: str, **extra: Any) -> AWSResponse:
    body = json.dumps({"__type": _PREFIX + code, "message": message, **extra}).encode()
    headers = {
        "content-type": "application/x-amz-json-1.0",
        "x-amzn-requestid": uuid.uuid4().hex,
        "content-length": str(len(body)),
    }
    return AWSResponse(url, status, headers, _Body(body))


def _succeeded(url: str) -> AWSResponse:
    body = b"{}"
    headers = {"content-type": "application/x-amz-json-1.0", "content-length": "2"}
    return AWSResponse(url, 200, headers, _Body(body))


class DynamoFaults:
    def __init__(self, rates: FaultRates, seed: int | None = None) -> None:
        self.rates = rates
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._applied_tokens: set[str] = set()
        self._http = URLLib3Session()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-send.dynamodb", self._before_send)

    def _draw(self, operation: str) -> str | None:
        rates = self.rates
        with self._lock:
            self.requests += 1
            roll = self._random.random()
        for fault, rate, applies in (
            ("conflict", rates.conflict, operation in _WRITES and operation != "BatchWriteItem"),
            ("throttle", rates.throttle, True),
            ("server_error", rates.server_error, True),
            ("applied_then_server_error", rates.applied_then_server_error, operation in _WRITES),
        ):
            if not applies:
                continue
            if roll < rate:
                return fault
            roll -= rate
        return None

    def _before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        target = str(request.headers.get("X-Amz-Target", b"") or "")
        if isinstance(request.headers.get("X-Amz-Target"), bytes):
            target = request.headers["X-Amz-Target"].decode()
        operation = target.rsplit(".", 1)[-1]
        token = None
        if operation == "TransactWriteItems":
            token = json.loads(request.body or b"{}").get("ClientRequestToken")
            with self._lock:
                if token is not None and token in self._applied_tokens:
                    # The retry of a transaction that was applied: DynamoDB answers success.
                    self.injected["idempotent_retry"] += 1
                    return _succeeded(request.url)
        fault = self._draw(operation)
        if fault is None:
            return None
        with self._lock:
            self.injected[fault] += 1
        url = request.url
        if fault == "conflict":
            if operation == "TransactWriteItems":
                count = len(json.loads(request.body or b"{}").get("TransactItems", []))
                reasons = [{"Code": "None"} for _ in range(count)]
                reasons[self._random.randrange(count)] = {
                    "Code": "TransactionConflict",
                    "Message": "Transaction is ongoing for the item",
                }
                codes = ", ".join(r["Code"] for r in reasons)
                return _answer(
                    url,
                    400,
                    "TransactionCanceledException",
                    f"Transaction cancelled, please refer cancellation reasons for specific "
                    f"reasons [{codes}]",
                    CancellationReasons=reasons,
                )
            return _answer(
                url, 400, "TransactionConflictException", "Transaction is ongoing for the item"
            )
        if fault == "throttle":
            return _answer(url, 400, "ThrottlingException", "Rate of requests exceeds the allowed")
        if fault == "applied_then_server_error":
            answer = self._http.send(request)
            if answer.status_code == 200 and token is not None:
                with self._lock:
                    self._applied_tokens.add(token)
        return _answer(url, 500, "InternalServerError", "Internal server error")
