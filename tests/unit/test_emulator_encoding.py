"""The emulator's encoding of DynamoDB item responses (`infra._dynamodb_json.encode`)
is `json.dumps` with binary values in base64, however it gets there: large binary values are
spliced in after encoding, and a body whose placeholders cannot be found exactly is encoded
the plain way."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable_streams_aws.infra import _dynamodb_json
from durable_streams_aws.infra._dynamodb_json import _base64, encode


def plain(result: dict[str, Any]) -> str:
    return json.dumps(result, default=_base64, separators=(",", ":"))


def page(*blobs: bytes, text: str = "t") -> dict[str, Any]:
    items = [
        {"pk": {"S": text}, "sk": {"S": f"c#{n:04}"}, "d": {"B": blob}, "m": {"M": {}}}
        for n, blob in enumerate(blobs)
    ]
    return {"Items": items, "Count": len(items), "ScannedCount": len(items)}


@pytest.mark.parametrize(
    "blobs",
    [
        (),
        (b"",),
        (b"x" * 100,),
        (bytes(range(256)) * 64,),  # at the splicing size
        (bytes(range(256)) * 256, b"small", bytes(range(255, -1, -1)) * 300),
        tuple(bytes([n]) * 70_000 for n in range(16)),
    ],
    ids=["none", "empty", "small", "at the size", "mixed", "a megabyte"],
)
def test_bodies_are_json_dumps_s(blobs: tuple[bytes, ...]) -> None:
    result = page(*blobs, text='quotes " and \\ and ü and \x00')
    assert encode(result) == plain(result)
    assert json.loads(encode(result))["Count"] == len(blobs)


def test_large_values_are_spliced_in_not_encoded_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    dumps = _dynamodb_json.json.dumps

    def counted(*args: Any, **kwargs: Any) -> str:
        calls.append(1)
        return dumps(*args, **kwargs)

    result = page(b"a" * 5000, b"b" * 70_000)
    monkeypatch.setattr(_dynamodb_json.json, "dumps", counted)
    text = encode(result)
    assert len(calls) == 1  # no fallback to the plain way
    monkeypatch.undo()
    assert text == plain(result)


def test_a_stored_string_holding_the_marker_is_encoded_the_plain_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_dynamodb_json.secrets, "token_hex", lambda _: "fixedmarker")
    for text in ("fixedmarker", "fixedmarker:0:", "x fixedmarker:1: y"):
        result = page(b"a" * 5000, b"b" * 5000, text=text)
        assert encode(result) == plain(result)
