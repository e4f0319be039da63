"""JSON mode (PROTOCOL.md section 9.1): validation, one-level flattening, original bytes."""

from __future__ import annotations

import json

import pytest

from durable_streams_aws.core.protocol.errors import ProtocolError
from durable_streams_aws.core.protocol.jsonmode import (
    join_lines,
    join_messages,
    split_lines,
    split_messages,
)


def _split(body: bytes, *, allow_empty_array: bool = False) -> list[bytes]:
    return split_messages(body, allow_empty_array=allow_empty_array)


# ---------------------------------------------------------------- flattening


@pytest.mark.parametrize(
    ("body", "messages"),
    [
        # single non-array values: one message
        (b'{"event": "created"}', [b'{"event": "created"}']),
        (b'{"a" : 1}', [b'{"a" : 1}']),
        (b"{}", [b"{}"]),
        # the spec's examples
        (b'[{"event": "a"}, {"event": "b"}]', [b'{"event": "a"}', b'{"event": "b"}']),
        (b"[[1,2], [3,4]]", [b"[1,2]", b"[3,4]"]),
        (b"[[[1,2,3]]]", [b"[[1,2,3]]"]),
        # exactly one level
        (b"[[]]", [b"[]"]),
        (b"[[], []]", [b"[]", b"[]"]),
        (b"[{}]", [b"{}"]),
        (b'[{"x": [1, [2, [3]]]}]', [b'{"x": [1, [2, [3]]]}']),
        (b"[1]", [b"1"]),
        (b"[1,2,3]", [b"1", b"2", b"3"]),
        # primitives
        (b"1", [b"1"]),
        (b"0", [b"0"]),
        (b"-1.5e10", [b"-1.5e10"]),
        (b"1E+2", [b"1E+2"]),
        (b'"hello"', [b'"hello"']),
        (b'""', [b'""']),
        (b"true", [b"true"]),
        (b"false", [b"false"]),
        (b"null", [b"null"]),
        (
            b'[1, "two", true, false, null, 3.25, {"k": "v"}, [4]]',
            [b"1", b'"two"', b"true", b"false", b"null", b"3.25", b'{"k": "v"}', b"[4]"],
        ),
        (b"[null]", [b"null"]),
        (b'["]", ",", "[", "\\"]"]', [b'"]"', b'","', b'"["', b'"\\"]"']),
        (b'["a,b", {"c": "]"}]', [b'"a,b"', b'{"c": "]"}']),
    ],
)
def test_split(body: bytes, messages: list[bytes]) -> None:
    assert _split(body) == messages


@pytest.mark.parametrize(
    ("body", "messages"),
    [
        (b'  {"a": 1}  ', [b'{"a": 1}']),
        (b'\n\t\r {"a": 1}\r\n', [b'{"a": 1}']),
        (b" 7 ", [b"7"]),
        (b"  [1,2]  ", [b"1", b"2"]),
        (b"[ 1 , 2 ]", [b"1", b"2"]),
        (b"[\n  1,\n  2\n]\n", [b"1", b"2"]),
        (b'[\t{ "a" : 1 }\t,\r\n{ "b" : 2 } ]', [b'{ "a" : 1 }', b'{ "b" : 2 }']),
        (b"[1 ,2]", [b"1", b"2"]),
        (b"[1, 2 ,3 ]", [b"1", b"2", b"3"]),
    ],
)
def test_whitespace_around_messages_is_trimmed(body: bytes, messages: list[bytes]) -> None:
    assert _split(body) == messages


@pytest.mark.parametrize(
    "message",
    [
        b'{"a" : 1}',
        b'{ "b":[1 ,2] ,"a":{ } }',
        b'{"z": 1, "a": 2}',  # key order kept
        b'{"a": 1, "a": 2}',  # duplicate keys kept verbatim
        b'{"n": 1.0}',
        b'{"n": 1.50}',
        b'{"n": 1e2}',
        b'{"n": 12345678901234567890123}',
        b'{"s": "\\u00e9"}',  # escape kept as an escape
        b'{"s": "\\/"}',
        '{"s": "caf\u00e9 \u65e5\u672c \U0001f600"}'.encode(),  # raw unicode kept as UTF-8
        b'{"s": "\\ud83d\\ude00"}',
        b'"\\n\\t"',
    ],
)
def test_message_bytes_are_kept_exactly(message: bytes) -> None:
    assert _split(message) == [message]
    assert _split(b"[" + message + b"]") == [message]
    assert _split(b"[ " + message + b" ,\n" + message + b" ]") == [message, message]


def test_unicode_preserved_not_escaped() -> None:
    text = '[{"name": "J\u00fcrgen"}, "\u4e2d\u6587", "\U0001f680"]'
    messages = _split(text.encode())
    assert messages == [
        '{"name": "J\u00fcrgen"}'.encode(),
        '"\u4e2d\u6587"'.encode(),
        '"\U0001f680"'.encode(),
    ]
    assert b"\\u" not in b"".join(messages)


def test_each_message_is_itself_valid_json() -> None:
    body = b'[{"a": [1, 2]}, [3], "x", 4, null]'
    for message in _split(body):
        json.loads(message)


def test_many_messages() -> None:
    body = json.dumps([{"i": i} for i in range(1000)]).encode()
    messages = _split(body)
    assert len(messages) == 1000
    assert [json.loads(m)["i"] for m in messages] == list(range(1000))


# ---------------------------------------------------------------- empty arrays


@pytest.mark.parametrize("body", [b"[]", b"[ ]", b" [\n] ", b"\t[\r\n]\t"])
def test_empty_array_rejected_for_appends(body: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        _split(body, allow_empty_array=False)
    assert info.value.status == 400


@pytest.mark.parametrize("body", [b"[]", b"[ ]", b" [\n] ", b"\t[\r\n]\t"])
def test_empty_array_allowed_for_create(body: bytes) -> None:
    assert _split(body, allow_empty_array=True) == []


@pytest.mark.parametrize("allow_empty_array", [True, False])
def test_nested_empty_array_is_one_message(allow_empty_array: bool) -> None:
    assert _split(b"[[]]", allow_empty_array=allow_empty_array) == [b"[]"]


@pytest.mark.parametrize("allow_empty_array", [True, False])
def test_non_empty_array_same_either_way(allow_empty_array: bool) -> None:
    assert _split(b"[1, 2]", allow_empty_array=allow_empty_array) == [b"1", b"2"]


# ---------------------------------------------------------------- invalid JSON


INVALID = [
    pytest.param(b"", id="empty"),
    pytest.param(b"   ", id="whitespace-only"),
    pytest.param(b"{", id="unclosed-object"),
    pytest.param(b"[", id="unclosed-array"),
    pytest.param(b"[1,", id="unclosed-after-comma"),
    pytest.param(b"[1,]", id="trailing-comma"),
    pytest.param(b"[,1]", id="leading-comma"),
    pytest.param(b"[1 2]", id="missing-comma"),
    pytest.param(b"{'a': 1}", id="single-quotes"),
    pytest.param(b"{a: 1}", id="bare-key"),
    pytest.param(b"hello", id="bare-word"),
    pytest.param(b"NaN", id="nan"),
    pytest.param(b"Infinity", id="infinity"),
    pytest.param(b"-Infinity", id="minus-infinity"),
    pytest.param(b"[NaN]", id="nan-in-array"),
    pytest.param(b'{"x": NaN}', id="nan-in-object"),
    pytest.param(b"[1, Infinity]", id="infinity-in-array"),
    pytest.param(b"{} {}", id="two-documents"),
    pytest.param(b"[1] [2]", id="two-arrays"),
    pytest.param(b"1 2", id="two-numbers"),
    pytest.param(b'{"a": 1}x', id="trailing-garbage"),
    pytest.param(b"01", id="leading-zero"),
    pytest.param(b".5", id="leading-dot"),
    pytest.param(b"+1", id="plus"),
    pytest.param(b"True", id="python-true"),
    pytest.param(b"None", id="python-none"),
    pytest.param(b'"unterminated', id="unterminated-string"),
    pytest.param(b'"tab\there"', id="raw-control-char"),
    pytest.param(b'"\\x41"', id="bad-escape"),
    pytest.param(b"\xff\xfe", id="not-utf8"),
    pytest.param(b'"\xc3"', id="truncated-utf8"),
    pytest.param(b"\xef\xbb\xbf{}", id="utf8-bom"),
    pytest.param(b"// comment\n{}", id="comment"),
    pytest.param(b"\x00", id="null-byte"),
    pytest.param(b"\x0c{}", id="form-feed-whitespace"),
]


@pytest.mark.parametrize("body", INVALID)
@pytest.mark.parametrize("allow_empty_array", [True, False])
def test_invalid_json_rejected(body: bytes, allow_empty_array: bool) -> None:
    with pytest.raises(ProtocolError) as info:
        _split(body, allow_empty_array=allow_empty_array)
    assert info.value.status == 400


def test_deeply_nested_json_is_a_400_not_a_crash() -> None:
    depth = 100_000
    with pytest.raises(ProtocolError) as info:
        _split(b"[" * depth + b"]" * depth)
    assert info.value.status == 400


def test_very_long_integer_is_valid_json() -> None:
    number = b"1" * 5000
    assert _split(number) == [number]


# ---------------------------------------------------------------- join


@pytest.mark.parametrize(
    ("messages", "body"),
    [
        ([], b"[]"),
        ([b"1"], b"[1]"),
        ([b'{"a" : 1}'], b'[{"a" : 1}]'),
        ([b"1", b'"two"', b"[3]"], b'[1,"two",[3]]'),
        ([b"[]", b"{}"], b"[[],{}]"),
    ],
)
def test_join_messages(messages: list[bytes], body: bytes) -> None:
    assert join_messages(messages) == body


@pytest.mark.parametrize(
    "body",
    [
        b'{"a" : 1}',
        b"[1, 2, 3]",
        b'[{"x": [1, 2]}, "s", null, true, 1.5e3]',
        b"[[1,2], [3,4]]",
        '["caf\u00e9", {"k": "\U0001f600"}]'.encode(),
    ],
)
def test_join_of_split_is_valid_json_with_same_values(body: bytes) -> None:
    joined = join_messages(_split(body))
    value = json.loads(body)
    expected = value if isinstance(value, list) else [value]
    assert json.loads(joined) == expected


def test_join_of_several_appends_reads_back_every_message() -> None:
    appends = [b'{"a" : 1}', b"[2, 3]", b"[[4]]"]
    stored = [m for body in appends for m in _split(body)]
    assert join_messages(stored) == b'[{"a" : 1},2,3,[4]]'


@pytest.mark.parametrize(
    "messages",
    [
        [b'{"a":1}'],
        [b'{"a":1}', b"[1,2]", b'"x,y"', b"3"],
        [b'"comma then newline escaped: ,\\\\n"', b"{}"],
    ],
)
def test_the_line_layout_is_the_same_array_and_splits_back(messages: list[bytes]) -> None:
    body = join_lines(messages)
    assert body.startswith(b"[\n") and body.endswith(b"\n]")
    assert json.loads(body) == json.loads(join_messages(messages))
    assert split_lines(body) == messages == split_messages(body, allow_empty_array=True)


def test_messages_holding_a_line_break_keep_the_usual_layout() -> None:
    messages = [b'{"a":\n1}', b"2"]
    assert join_lines(messages) == join_messages(messages)
    assert split_lines(join_messages(messages)) is None
    assert join_lines([]) == b"[]"


def test_only_the_line_layout_is_split_as_lines() -> None:
    assert split_lines(b'[{"a":1}]') is None  # the usual layout
    assert split_lines(b'[\n{"a":\n1},\n2\n]') is None  # a break inside a message
    assert split_lines(b"[\n1,\n2\n]") == [b"1", b"2"]
