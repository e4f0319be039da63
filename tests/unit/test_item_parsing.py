"""`ItemJSONParser` parses DynamoDB's responses into exactly what botocore's own parser makes
of them: the same bodies, parsed both ways, for every operation that answers items."""

from __future__ import annotations

import base64
import json
from typing import Any

import botocore.session
import pytest
from botocore.parsers import JSONParser

from durable_streams_aws.core.storage._item_parsing import ItemJSONParser, ItemParserFactory

_MODEL = botocore.session.get_session().get_service_model("dynamodb")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


ITEM = {
    "pk": {"S": "d#abc"},
    "sk": {"S": "c#00000000000000001024"},
    "st": {"N": "0"},
    "b": {"B": _b64(b"\x00\xff" * 600)},
    "empty": {"B": ""},
    "unicode": {"S": "ü😀"},
    "flag": {"BOOL": True},
    "nothing": {"NULL": True},
    "tags": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "blobs": {"BS": [_b64(b"x"), _b64(b"")]},
    "map": {"M": {"inner": {"B": _b64(b"y")}, "n": {"N": "-3"}}},
    "list": {"L": [{"S": "z"}, {"L": []}, {"M": {}}]},
    "odd": {"S": "x", "N": "1"},  # not a DynamoDB value: left to botocore
    "nullish": {"S": None},
    "future": {"XYZ": "a member this botocore does not know"},
}

BODIES: list[tuple[str, dict[str, Any]]] = [
    ("Query", {"Count": 2, "ScannedCount": 3, "Items": [ITEM, {"pk": {"S": "x"}}],
               "LastEvaluatedKey": {"pk": {"S": "x"}, "sk": {"S": "y"}}}),
    ("Query", {"Count": 0, "ScannedCount": 0, "Items": []}),
    ("Scan", {"Count": 1, "ScannedCount": 1, "Items": [ITEM]}),
    ("GetItem", {"Item": ITEM}),
    ("GetItem", {}),
    ("BatchGetItem", {"Responses": {"t": [ITEM, ITEM]}, "UnprocessedKeys": {}}),
    ("UpdateItem", {"Attributes": ITEM, "ConsumedCapacity": {"TableName": "t",
                                                             "CapacityUnits": 1.0}}),
    ("TransactWriteItems", {}),
]  # fmt: skip


@pytest.mark.parametrize(("operation", "body"), BODIES)
def test_bodies_parse_as_botocore_parses_them(operation: str, body: dict[str, Any]) -> None:
    shape = _MODEL.operation_model(operation).output_shape
    response = {"body": json.dumps(body).encode(), "headers": {}, "status_code": 200}
    assert ItemJSONParser().parse(response, shape) == JSONParser().parse(response, shape)


def test_an_error_parses_as_botocore_parses_it() -> None:
    shape = _MODEL.operation_model("Query").output_shape
    body = {"__type": "com.amazon.coral.validation#ValidationException", "message": "no"}
    response = {"body": json.dumps(body).encode(), "headers": {}, "status_code": 400}
    assert ItemJSONParser().parse(response, shape) == JSONParser().parse(response, shape)


def test_the_factory_gives_it_for_json_only() -> None:
    factory = ItemParserFactory()
    assert type(factory.create_parser("json")) is ItemJSONParser
    assert type(factory.create_parser("rest-xml")) is not ItemJSONParser
