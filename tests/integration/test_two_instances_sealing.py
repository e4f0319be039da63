"""Two `dsaws serve --aws` processes on one table and bucket, both sealing in the background
as often as they can (so two sealers race on the same streams), while clients append and
read through both and the collector runs with no grace: every acknowledged message is read
back once, in order, through either instance."""

from __future__ import annotations

import json
import os
import uuid

import boto3
import httpx
from support import ServerProcess, dsaws

from durable_streams_aws.infra.emulator import Emulator

AGGRESSIVE = {
    "DS_SEAL_INTERVAL": "0.05",
    "DS_SEAL_HOT_BYTES": "0",  # every commit marks its stream
    "DS_SEGMENT_BYTES": "2000",
    "DS_SEAL_PAGE_BYTES": "300",
    "DS_INLINE_MAX_BYTES": "1024",
}


def test_two_instances_sealing_the_same_streams_lose_and_double_nothing(
    emulator: Emulator,
) -> None:
    suffix = uuid.uuid4().hex[:12]
    table = bucket = f"seal2-{suffix}"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        **AGGRESSIVE,
    }
    args = ("--aws", "--table", table, "--bucket", bucket, "--long-poll-timeout", "1")
    headers = {"Content-Type": "application/json"}
    acknowledged: dict[str, list[int]] = {"/v1/stream/one": [], "/v1/stream/two": []}
    with (
        ServerProcess(*args, env=env) as one,
        ServerProcess(*args, env=env) as two,
        httpx.Client(base_url=one.base_url, timeout=30) as first,
        httpx.Client(base_url=two.base_url, timeout=30) as second,
    ):
        clients = [first, second]
        for url in acknowledged:
            assert first.put(url, headers=headers).status_code == 201
        serial = 0
        for round_ in range(40):
            for index, url in enumerate(acknowledged):
                batch = list(range(serial, serial + 3))
                serial += 3
                body = json.dumps([{"n": n, "pad": "p" * (n % 90)} for n in batch])
                response = clients[(round_ + index) % 2].post(url, content=body, headers=headers)
                assert response.status_code == 204, response.text
                acknowledged[url].extend(batch)
            if round_ % 10 == 9:
                _collect(env, table, bucket)
            for client in clients:
                for url, numbers in acknowledged.items():
                    assert _read_all(client, url) == numbers
        last = "/v1/stream/two"
        closed = first.post(last, headers={**headers, "Stream-Closed": "true"})
        assert closed.status_code == 204
        _collect(env, table, bucket)
        for client in clients:
            for url, numbers in acknowledged.items():
                assert _read_all(client, url) == numbers
    # Whatever the racing sealers left (leftover chunks, a last run cut short) one more run
    # finishes: nothing but segments holds the streams' data, and it still reads the same.
    report = _seal(env, table, bucket)
    assert report["streams_failed"] == 0
    dynamodb = boto3.client("dynamodb", endpoint_url=emulator.endpoint, region_name="us-east-1")
    data = [
        item
        for page in dynamodb.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
        if item["pk"]["S"].startswith("d#")
    ]
    assert data and all("pg" in item for item in data)
    with ServerProcess(*args, env=env) as again, httpx.Client(base_url=again.base_url) as client:
        for url, numbers in acknowledged.items():
            assert _read_all(client, url) == numbers


def _read_all(client: httpx.Client, url: str) -> list[int]:
    """Every message from the beginning, response after response (small ones: the server
    answers at most a page of a sealed segment per response when pages are small)."""
    numbers: list[int] = []
    offset = "-1"
    while True:
        response = client.get(url, params={"offset": offset})
        assert response.status_code == 200, response.text
        numbers.extend(message["n"] for message in response.json())
        offset = response.headers["Stream-Next-Offset"]
        if response.headers.get("Stream-Up-To-Date") == "true":
            return numbers


def _collect(env: dict[str, str], table: str, bucket: str) -> None:
    dsaws(env, "gc", "--table", table, "--bucket", bucket, "--orphan-grace", "0")


def _seal(env: dict[str, str], table: str, bucket: str) -> dict[str, int]:
    return dsaws(env, "seal", "--table", table, "--bucket", bucket, "--all")
