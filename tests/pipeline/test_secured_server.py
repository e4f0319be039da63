"""The pipeline against a server with access control: the `token` option reads (a prefix
listing included) and writes; without it the query fails saying the server refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from auth_support import ALL_ACTIONS, KEY_SET_TEXT, token
from support import ServerProcess

from durable_streams_aws.client import DurableStream

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.fixture(scope="module")
def secured_url() -> Iterator[str]:
    env = {"DS_AUTH_SECRET": KEY_SET_TEXT, "DS_LISTING": "true"}
    with ServerProcess("--auth", "--long-poll-timeout", "1", env=env) as server:
        yield f"{server.base_url}/v1/stream"


def test_reads_and_writes_carry_the_token(spark: Any, secured_url: str) -> None:
    admin = token(f"{ALL_ACTIONS}:*")
    with DurableStream(f"{secured_url}/orders/1", token=admin) as stream:
        stream.create("application/json")
        stream.append([{"n": 1}, {"n": 2}])
    with DurableStream(f"{secured_url}/copy", token=admin) as stream:
        stream.create("application/json")

    reader = token("read:*")
    frame = (
        spark.read.format("durable_streams")
        .option("url", secured_url)
        .option("prefix", "orders/")
        .option("token", reader)
        .load()
    )
    assert sorted(row["message"] for row in frame.collect()) == ['{"n":1}', '{"n":2}']

    (
        frame.select("message")
        .write.format("durable_streams")
        .mode("append")
        .option("url", secured_url)
        .option("stream", "copy")
        .option("sinkId", "secured")
        .option("token", token("read,append:copy"))
        .save()
    )
    with DurableStream(f"{secured_url}/copy", token=reader) as stream:
        copied = [m for batch in stream.read() for m in batch.messages or []]
    assert sorted(copied, key=lambda m: m["n"]) == [{"n": 1}, {"n": 2}]

    anonymous = spark.read.format("durable_streams").option("url", secured_url)
    with pytest.raises(Exception, match='401 Unauthorized: Bearer realm="durable-streams"'):
        anonymous.option("stream", "orders/1").load().collect()
