"""A direct JSON encoding of moto's DynamoDB item responses, and no XML search in JSON bodies.

moto serialises every response by walking botocore's output shape member by member; for a Query
of a few hundred items that walk costs several times the query itself (it was more than 80% of
a catch-up read's time). DynamoDB's wire format for the item operations is plain JSON of the
result, binary values in base64, so those results are encoded with `json.dumps` instead. Errors
and every other operation keep moto's own serialiser.
`tests/integration/test_emulator_fast_paths.py` checks that both encodings agree.

moto also rewrites `<RequestId>` in every response body with a regular expression whose
look-behind is tried at every character: several milliseconds for a 1 MB page of items. Bodies
that hold no `<RequestId>` (all JSON ones) are passed as they are.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from typing import Any

from moto.core import responses
from moto.core.responses import ActionContext, BaseResponse
from moto.dynamodb.responses import DynamoResult

# The operations whose results hold nothing but items, keys, counts and capacities.
ITEM_OPERATIONS = frozenset(
    {
        "GetItem",
        "BatchGetItem",
        "Query",
        "Scan",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "TransactGetItems",
    }
)
CONTENT_TYPE = "application/x-amz-json-1.0"

_moto_execute_result = DynamoResult.execute_result
_moto_enrich_response = BaseResponse._enrich_response


def _base64(value: object) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"not JSON-encodable in a DynamoDB item response: {type(value).__name__}")


# Binary values at least this long are spliced into the body rather than encoded by `json`.
_SPLICED_BYTES = 4096


def encode(result: dict[str, Any]) -> str:
    """The response body DynamoDB would send for `result`.

    A page of large binary values (a catch-up read: a megabyte of chunks) spent more time in
    `json` escaping their base64 text, which never needs escaping, than in encoding it. Large
    values are encoded as a placeholder holding a random marker, and their base64 text is
    spliced in its place afterwards; should the markers not come out exactly once each, in
    order (a stored string holding the marker), the body is encoded the plain way."""
    spliced: list[bytes] = []
    marker = secrets.token_hex(8)

    def placeholder(value: object) -> str:
        if type(value) is not bytes:
            return _base64(value)
        if len(value) < _SPLICED_BYTES:
            return binascii.b2a_base64(value, newline=False).decode("ascii")
        spliced.append(value)
        return f"{marker}:{len(spliced) - 1}:"

    text = json.dumps(result, default=placeholder, separators=(",", ":"))
    if not spliced:
        return text
    pieces = text.split(marker)
    if len(pieces) != len(spliced) + 1:
        return json.dumps(result, default=_base64, separators=(",", ":"))
    out = [pieces[0]]
    for number, (value, piece) in enumerate(zip(spliced, pieces[1:], strict=True)):
        label = f":{number}:"
        if not piece.startswith(label):
            return json.dumps(result, default=_base64, separators=(",", ":"))
        out.append(binascii.b2a_base64(value, newline=False).decode("ascii"))
        out.append(piece[len(label) :])
    return "".join(out)


def _execute_result(self: DynamoResult, context: ActionContext) -> Any:
    result = self.result
    if context.operation_model.name not in ITEM_OPERATIONS or not isinstance(result, dict):
        return _moto_execute_result(self, context)
    return 200, {"Content-Type": CONTENT_TYPE}, encode(result)


def _enrich_response(headers: dict[str, str], body: Any) -> tuple[dict[str, str], Any]:
    marker: str | bytes = "<RequestId>" if isinstance(body, str) else b"<RequestId>"
    if not isinstance(body, str | bytes) or marker in body:
        return _moto_enrich_response(headers, body)
    if "status" in headers:
        headers["status"] = str(headers["status"])
    responses.gen_amzn_requestid_long(headers)  # moto's own request id header
    return headers, body


def install() -> None:
    DynamoResult.execute_result = _execute_result  # type: ignore[method-assign]
    BaseResponse._enrich_response = staticmethod(_enrich_response)  # type: ignore[method-assign]


def uninstall() -> None:
    DynamoResult.execute_result = _moto_execute_result  # type: ignore[method-assign]
    BaseResponse._enrich_response = staticmethod(_moto_enrich_response)  # type: ignore[method-assign]
