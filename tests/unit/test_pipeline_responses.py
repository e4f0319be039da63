"""A read response's messages split by the pipeline are those the server's own split gives,
byte for byte."""

from __future__ import annotations

import json
import random

import pytest

pytest.importorskip("pyspark")

from durable_streams_aws.core.protocol.jsonmode import join_lines, join_messages, split_messages
from durable_streams_aws.pipeline._responses import response_messages

VALUES = [
    0,
    -1.5e300,
    'é\n"',
    {"a": [1, {"b": None}]},
    [],
    {},
    True,
    None,
    "😀",
    12345678901234567890,
]


@pytest.mark.parametrize("seed", range(5))
def test_the_split_is_the_servers(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        values = [rng.choice(VALUES) for _ in range(rng.randrange(0, 30))]
        messages = [
            json.dumps(v, indent=rng.choice([None, 1]), ensure_ascii=rng.random() < 0.5).encode()
            for v in values
        ]
        laid_out = (
            join_messages(messages),
            join_lines(messages),  # a line each, unless a message holds a line break
            b" [ " + b" ,\n".join(messages) + b" ]\n",
        )
        for body in laid_out:
            assert response_messages(body) == split_messages(body, allow_empty_array=True)


def test_a_body_that_is_not_an_array_is_one_message() -> None:
    assert response_messages(b' {"a": 1} ') == [b'{"a": 1}']
    assert response_messages(b"[]") == [] == response_messages(b"")


def test_a_broken_body_fails() -> None:
    with pytest.raises(ValueError):
        response_messages(b'[{"a": 1} {"b": 2}]')
    with pytest.raises(ValueError):
        response_messages(b'[{"a": ]')
