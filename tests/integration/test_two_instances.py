"""Two `dsaws serve --aws` processes on one table and bucket (as two Lambda instances are),
with `dsaws gc --orphan-grace 0` run between the steps: nothing acknowledged may be lost.

This is the reported reproduction of the re-create race: instance one appends (and so
remembers the stream's incarnation), instance two deletes and re-creates the stream, and
instance one then appends a body large enough to go to S3.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from support import ServerProcess, dsaws

from infra.emulator import Emulator

LARGE = "L" * 5000  # over the servers' 1 KiB inline limit: stored in S3
URL = "/v1/stream/shared"


@dataclass
class Deployment:
    one: httpx.Client
    two: httpx.Client
    env: dict[str, str]
    table: str
    bucket: str

    def collect(self) -> dict[str, int]:
        return dsaws(
            self.env, "gc", "--table", self.table, "--bucket", self.bucket, "--orphan-grace", "0"
        )


@pytest.fixture
def deployment(emulator: Emulator) -> Iterator[Deployment]:
    suffix = uuid.uuid4().hex[:12]
    table, bucket = f"two-{suffix}", f"two-{suffix}"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "DS_INLINE_MAX_BYTES": "1024",
    }
    args = ("--aws", "--table", table, "--bucket", bucket, "--long-poll-timeout", "1")
    with (
        ServerProcess(*args, env=env) as one,
        ServerProcess(*args, env=env) as two,
        httpx.Client(base_url=one.base_url, timeout=30) as first,
        httpx.Client(base_url=two.base_url, timeout=30) as second,
    ):
        yield Deployment(first, second, env, table, bucket)


def read_everything(client: httpx.Client) -> bytes:
    response = client.get(URL, params={"offset": "-1"})
    assert response.status_code == 200, response.text
    return response.content


@pytest.mark.parametrize(
    ("content_type", "first", "large", "expected"),
    [
        ("text/plain", "small", LARGE, LARGE.encode()),
        (
            "application/json",
            '"small"',
            json.dumps(list(range(1500))),
            json.dumps(list(range(1500)), separators=(",", ":")).encode(),
        ),
    ],
    ids=["text", "json"],
)
def test_append_after_a_recreate_by_the_other_instance_survives_the_collector(
    deployment: Deployment, content_type: str, first: str, large: str, expected: bytes
) -> None:
    headers = {"Content-Type": content_type}
    for _ in range(5):
        assert deployment.one.put(URL, headers=headers).status_code == 201
        assert deployment.one.post(URL, content=first, headers=headers).status_code == 204
        assert deployment.two.delete(URL).status_code == 204
        assert deployment.two.put(URL, headers=headers).status_code == 201
        acknowledged = deployment.one.post(URL, content=large, headers=headers)
        assert acknowledged.status_code == 204
        deployment.collect()
        for client in (deployment.one, deployment.two):
            assert read_everything(client) == expected
        assert deployment.two.delete(URL).status_code == 204


def test_create_over_an_expired_stream_survives_the_collector(deployment: Deployment) -> None:
    headers = {"Content-Type": "text/plain"}
    for _ in range(3):
        expiring = {**headers, "Stream-TTL": "1"}
        assert deployment.two.put(URL, headers=expiring).status_code == 201
        time.sleep(1.3)  # past TTL plus its renewal window
        assert deployment.one.put(URL, content=LARGE, headers=headers).status_code == 201
        deployment.collect()
        for client in (deployment.one, deployment.two):
            assert read_everything(client) == LARGE.encode()
        assert deployment.one.delete(URL).status_code == 204
