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

from typing import Any

from moto.core import responses
from moto.core.responses import ActionContext, BaseResponse
from moto.dynamodb.responses import DynamoResult

from .._dynamodb_json import CONTENT_TYPE, encode

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

_moto_execute_result = DynamoResult.execute_result
_moto_enrich_response = BaseResponse._enrich_response


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
