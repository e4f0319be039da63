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
from support import ServerProcess, dsaws, dynamodb_endpoint

from durable_streams_aws.infra.emulator import Emulator

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


pytestmark = pytest.mark.both_dynamodbs


@pytest.fixture
def deployment(
    emulator: Emulator, dynamodb_kind: str, request: pytest.FixtureRequest
) -> Iterator[Deployment]:
    suffix = uuid.uuid4().hex[:12]
    table, bucket = f"two-{suffix}", f"two-{suffix}"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "DS_INLINE_MAX_BYTES": "1024",
    }
    tables = dynamodb_endpoint(request, dynamodb_kind)
    if tables is not None:
        env["AWS_ENDPOINT_URL_DYNAMODB"] = tables
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


def test_writers_on_both_instances_share_a_hot_stream(deployment: Deployment) -> None:
    """Eight writers on each instance append to one stream at once (half of them idempotent
    producers), while a reader on each instance follows it with long-polls: every
    acknowledged record is read exactly once, at the offset it was acknowledged at, by both
    readers, in the same order; then a close on one instance ends it for both."""
    import threading

    url = "/v1/stream/hot"
    text = {"Content-Type": "text/plain"}
    assert deployment.one.put(url, headers=text).status_code == 201
    acknowledged: dict[bytes, str] = {}
    lock = threading.Lock()
    base_urls = [str(deployment.one.base_url), str(deployment.two.base_url)]

    def write(index: int) -> None:
        producer = index % 2 == 0
        with httpx.Client(base_url=base_urls[index % 2], timeout=30) as client:
            for seq in range(15):
                record = f"<{index:02d}:{seq:03d}>".encode()
                headers = dict(text)
                if producer:
                    headers.update(
                        {
                            "Producer-Id": f"p{index}",
                            "Producer-Epoch": "0",
                            "Producer-Seq": str(seq),
                        }
                    )
                answer = client.post(url, content=record, headers=headers)
                assert answer.status_code in {200, 204}, answer.text
                with lock:
                    acknowledged[record] = answer.headers["Stream-Next-Offset"]

    followed: list[bytes] = [b"", b""]
    done = threading.Event()

    def follow(which: int) -> None:
        offset = "-1"
        with httpx.Client(base_url=base_urls[which], timeout=30) as client:
            while True:
                answer = client.get(url, params={"offset": offset, "live": "long-poll"})
                if answer.status_code == 200:
                    followed[which] += answer.content
                offset = answer.headers["Stream-Next-Offset"]
                if answer.headers.get("Stream-Closed") == "true":
                    return
                if done.is_set() and answer.status_code == 204:
                    return

    writers = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    readers = [threading.Thread(target=follow, args=(i,)) for i in range(2)]
    for thread in [*readers, *writers]:
        thread.start()
    for thread in writers:
        thread.join(120)
    closed = deployment.two.post(url, headers={"Stream-Closed": "true"})
    assert closed.status_code == 204
    done.set()
    for thread in readers:
        thread.join(60)
    everything = read_everything_at(deployment.one, url)
    assert len(acknowledged) == 16 * 15
    assert everything.count(b"<") == len(acknowledged), "a record is missing or doubled"
    from durable_streams_aws.core.protocol.offsets import parse_position

    for record, offset in acknowledged.items():
        end = parse_position(offset)
        assert everything[end - len(record) : end] == record, "not at its offset"
    assert followed[0] == followed[1] == everything.replace(b"\0", b"")
    assert read_everything_at(deployment.two, url) == everything
    refused = deployment.one.post(url, content=b"late", headers=text)
    assert refused.status_code == 409


def read_everything_at(client: httpx.Client, url: str) -> bytes:
    """Every byte at its offset: a response's bytes are contiguous and end at its next offset
    (a range voided under load, which holds nothing, reads as zero bytes)."""
    from durable_streams_aws.core.protocol.offsets import parse_position

    data, offset = bytearray(), "-1"
    while True:
        answer = client.get(url, params={"offset": offset})
        assert answer.status_code == 200, answer.text
        offset = answer.headers["Stream-Next-Offset"]
        end = parse_position(offset)
        data.extend(b"\0" * (end - len(data)))
        data[end - len(answer.content) : end] = answer.content
        if answer.headers.get("Stream-Up-To-Date") == "true":
            return bytes(data)
