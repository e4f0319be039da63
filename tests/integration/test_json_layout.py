"""`Stream-Json-Layout: lines`, this server's ask for a JSON stream's catch-up read laid out a
message per line: the same array, offsets and ETag as the usual layout, the usual layout where
a message holds a line break, and a clear 400 for an ask that cannot be honoured."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from durable_streams_aws.core.app import create_app
from durable_streams_aws.core.protocol.jsonmode import split_lines
from durable_streams_aws.core.runtime import Backend

JSON = {"Content-Type": "application/json"}
LINES = {"Stream-Json-Layout": "lines"}


@pytest.fixture
def client(backend: Backend) -> Iterator[TestClient]:
    with TestClient(create_app(backend.settings, backend.store)) as test_client:
        yield test_client


def test_the_line_layout_serves_the_same_messages_offsets_and_etag(client: TestClient) -> None:
    url = "/v1/stream/layout"
    client.put(url, headers=JSON)
    first = client.post(url, content=b'[{"n": 1}, "a,b", [1, 2]]', headers=JSON)
    client.post(url, content=b'{"n" : 4}', headers=JSON)
    usual = client.get(url, params={"offset": "-1"})
    lined = client.get(url, params={"offset": "-1"}, headers=LINES)
    assert usual.status_code == lined.status_code == 200
    assert usual.content == b'[{"n": 1},"a,b",[1, 2],{"n" : 4}]'
    assert lined.content == b'[\n{"n": 1},\n"a,b",\n[1, 2],\n{"n" : 4}\n]'
    assert split_lines(lined.content) == [b'{"n": 1}', b'"a,b"', b"[1, 2]", b'{"n" : 4}']
    for header in ("stream-next-offset", "etag", "stream-up-to-date"):
        assert lined.headers[header] == usual.headers[header]
    middle = first.headers["stream-next-offset"]
    bounded = client.get(url, params={"offset": "-1", "until": middle}, headers=LINES)
    assert bounded.content == b'[\n{"n": 1},\n"a,b",\n[1, 2]\n]'
    assert json.loads(bounded.content) == json.loads(usual.content)[:3]


def test_a_message_holding_a_line_break_keeps_the_usual_layout(client: TestClient) -> None:
    url = "/v1/stream/layout-broken"
    client.put(url, headers=JSON)
    client.post(url, content=b'[{"a":\n 1}, 2]', headers=JSON)
    lined = client.get(url, params={"offset": "-1"}, headers=LINES)
    assert lined.content == b'[{"a":\n 1},2]'


def test_other_streams_are_served_as_they_are(client: TestClient) -> None:
    url = "/v1/stream/layout-text"
    client.put(url, headers={"Content-Type": "text/plain"})
    client.post(url, content=b"a,\nb", headers={"Content-Type": "text/plain"})
    assert client.get(url, params={"offset": "-1"}, headers=LINES).content == b"a,\nb"


@pytest.mark.parametrize(
    ("headers", "params"),
    [
        ({"Stream-Json-Layout": "columns"}, {"offset": "-1"}),
        (LINES, {"offset": "-1", "live": "long-poll"}),
        (LINES, {"offset": "-1", "live": "sse"}),
    ],
)
def test_an_ask_that_cannot_be_honoured_is_refused(
    client: TestClient, headers: dict[str, str], params: dict[str, str]
) -> None:
    url = "/v1/stream/layout-refused"
    client.put(url, headers=JSON)
    answer = client.get(url, params=params, headers=headers)
    assert answer.status_code == 400
    assert "Stream-Json-Layout" in answer.text
