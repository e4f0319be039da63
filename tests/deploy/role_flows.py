"""Each Lambda function of the stack, run through its flows against the emulator in this
process, with every AWS call that leaves the process recorded under the function that made it.

    python role_flows.py CONFIG.json RECORD.json

CONFIG names the emulator, each function's handler and environment (as the translated
template sets it), and the secrets' values. Each function's module is imported with its own
environment and keeps its own clients and store, as its Lambda instances would; the flows call
the handlers with the events Lambda delivers (Function URL requests, schedules, SQS batches).
A few steps stand in for time or for a writer that dies (`setup`): they are made with clients
of their own and recorded under "setup", never under a function.

Calls answered inside the process (the API function's warm-up, `functions._snapstart`) never
reach AWS and are not recorded: a call counts when botocore sends it.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from botocore.client import BaseClient
from botocore.endpoint import Endpoint
from iam_roles import describe
from support import webhook_receiver

from durable_streams_aws.core.storage._ranges import DEFAULT_VOID_AFTER_SECONDS as VOID_AFTER

RECORDS: list[dict[str, Any]] = []
_LABEL = ["setup"]
_CALL = threading.local()


def _install_recorder() -> None:
    make_api_call = BaseClient._make_api_call
    send = Endpoint._send

    def recording_call(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        service = self.meta.service_model.service_name
        record = {"function": _LABEL[0], **describe(service, operation, params)}
        outer = getattr(_CALL, "record", None)
        _CALL.record = record
        try:
            return make_api_call(self, operation, params)
        finally:
            _CALL.record = outer

    def recording_send(self: Endpoint, request: Any) -> Any:
        record = getattr(_CALL, "record", None)
        if record is not None and not record.get("sent"):
            record["sent"] = True  # once, however often it is retried
            RECORDS.append(record)
        return send(self, request)

    BaseClient._make_api_call = recording_call  # type: ignore[method-assign]
    Endpoint._send = recording_send  # type: ignore[method-assign]


@contextmanager
def acting_as(label: str) -> Iterator[None]:
    before, _LABEL[0] = _LABEL[0], label
    try:
        yield
    finally:
        _LABEL[0] = before


class Functions:
    """The stack's functions, each imported under its own environment."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.base_env = dict(os.environ)
        self.modules: dict[str, Any] = {}
        for name, function in config["functions"].items():
            os.environ.clear()
            os.environ.update({**self.base_env, **function["env"]})
            module_name, _ = function["handler"].rsplit(".", 1)
            with acting_as(name):
                self.modules[name] = importlib.import_module(module_name)
        os.environ.clear()
        os.environ.update(self.base_env)

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        from durable_streams_aws.functions.events import LambdaContext

        _, attribute = self.config["functions"][name]["handler"].rsplit(".", 1)
        handler = getattr(self.modules[name], attribute)
        # An event loop for Mangum, as the local Lambda bridge gives each invocation (the
        # subscription function's asyncio runs leave none behind).
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            with acting_as(name):
                return handler(event, LambdaContext())
        finally:
            loop.close()
            asyncio.set_event_loop(None)


class Api:
    """Requests to the API function, as CloudFront forwards them (the origin secret added)
    with a token that may do everything."""

    def __init__(self, functions: Functions, token: str, origin_secret: str) -> None:
        from durable_streams_aws.core.auth.origin import ORIGIN_SECRET_HEADER

        self.functions = functions
        self.headers = [
            ("authorization", f"Bearer {token}"),
            (ORIGIN_SECRET_HEADER, origin_secret),
        ]

    def __call__(
        self,
        method: str,
        target: str,
        body: bytes | dict[str, Any] = b"",
        expect: tuple[int, ...] = (200, 201, 204),
        **headers: str,
    ) -> dict[str, Any]:
        from durable_streams_aws.functions.events import function_url_event

        pairs = [(name.replace("_", "-").lower(), value) for name, value in headers.items()]
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            pairs.append(("content-type", "application/json"))
        if any(name == "authorization" for name, _ in pairs):
            given = [h for h in self.headers if h[0] != "authorization"]
        else:
            given = self.headers
        event = function_url_event(method, target, [*given, *pairs], body, "203.0.113.7")
        answer = dict(self.functions.invoke("ApiFunction", event))
        assert answer["statusCode"] in expect, (method, target, answer)
        return answer

    @staticmethod
    def body(answer: dict[str, Any]) -> bytes:
        raw = answer.get("body") or ""
        return base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode()

    @staticmethod
    def header(answer: dict[str, Any], name: str) -> str:
        return str({k.lower(): v for k, v in answer["headers"].items()}[name.lower()])


S = "/v1/stream/"
TEXT = {"content_type": "text/plain"}


def api_flows(api: Api, functions: Functions, hook_url: str) -> None:
    """The API's routes: the three append paths (inline, S3, producers), reads of every kind,
    close, forks, TTL, listing, deletes, hot streams with a dead writer and a close among
    them, and the subscriptions' control API."""
    store = functions.modules["ApiFunction"]._backend.store
    api("PUT", S + "plain/a", **TEXT)
    api("POST", S + "plain/a", b"small;", **TEXT)
    api("POST", S + "plain/a", b"L" * 300_000, **TEXT)  # past the inline limit: to S3
    api("POST", S + "plain/a", b"seq;", stream_seq="0001", **TEXT)
    read = api("GET", S + "plain/a?offset=-1")
    assert Api.body(read).startswith(b"small;L")
    tail = Api.header(read, "stream-next-offset")
    api("HEAD", S + "plain/a")
    api("GET", S + f"plain/a?offset={tail}&live=long-poll")
    api("GET", S + f"plain/a?offset={tail}&live=sse")

    api("PUT", S + "json/p", content_type="application/json")
    for seq in (0, 0, 1):  # the second is a duplicate
        api(
            "POST",
            S + "json/p",
            json.dumps([{"seq": seq}]).encode(),
            content_type="application/json",
            producer_id="p1",
            producer_epoch="0",
            producer_seq=str(seq),
        )

    api("PUT", S + "fork/f", stream_forked_from=S + "plain/a", **TEXT)
    api("POST", S + "fork/f", b"forked;", **TEXT)
    api("GET", S + "fork/f?offset=-1")
    api("POST", S + "plain/a", b"", stream_closed="true", **TEXT)
    api("DELETE", S + "plain/a")  # soft: the fork still reads it
    api("DELETE", S + "fork/f")  # the last fork: both go

    api("PUT", S + "plain/b", b"B" * 300_000, **TEXT)
    api("DELETE", S + "plain/b")
    api("PUT", S + "ttl/read", b"soon gone", stream_ttl="1", **TEXT)
    api("PUT", S + "ttl/unread", b"soon gone", stream_ttl="1", **TEXT)
    time.sleep(1.5)
    api("GET", S + "ttl/read?offset=-1", expect=(404,))  # reaped on sight
    # A fork that expires untouched after its source was deleted: the collector reaps it
    # and then its source (the cascade).
    api("PUT", S + "cascade/source", b"source", **TEXT)
    api("PUT", S + "cascade/fork", stream_forked_from=S + "cascade/source", stream_ttl="1", **TEXT)
    api("DELETE", S + "cascade/source")
    api("GET", "/v1/stream?prefix=json/")

    # A stream several instances write: reserved ranges, one writer that dies between its
    # reservation and its fill, readers that void its range, a close held among them.
    api("PUT", S + "hot/h", **TEXT)
    store.recent.mark_hot("hot/h")
    for index in range(3):
        api("POST", S + "hot/h", f"r{index};".encode(), **TEXT)
    die_after_reserving(functions, "hot/h", b"lost;")
    api("POST", S + "hot/h", b"after;", **TEXT)
    assert Api.body(api("GET", S + "hot/h?offset=-1")) == b"r0;r1;r2;"  # held at the gap...
    time.sleep(VOID_AFTER + 0.3)
    assert read_all(api, "hot/h").endswith(b"r2;after;")  # ...until voided
    die_after_reserving(functions, "hot/h", b"lost again;")
    api("POST", S + "hot/h", b"", stream_closed="true", **TEXT)

    # Subscriptions: a webhook on a pattern, a pull-wake on named streams, links added and
    # removed, the signing keys.
    webhook = {"type": "webhook", "pattern": "orders/*", "webhook": {"url": hook_url}}
    api("PUT", S + "__ds/subscriptions/orders", webhook)
    # Expired before the subscription function's check lists the pattern: it reaps it.
    api("PUT", S + "orders/expiring", b"soon gone", stream_ttl="1", **TEXT)
    api("PUT", S + "orders/1", b"first order", **TEXT)
    api("POST", S + "orders/1", b"second", **TEXT)
    api("GET", S + "__ds/subscriptions/orders")
    api("PUT", S + "extra/1", **TEXT)
    api("POST", S + "__ds/subscriptions/orders/streams", {"streams": ["extra/1"]})
    api("DELETE", S + "__ds/subscriptions/orders/streams/extra/1")
    api("GET", S + "__ds/jwks.json")
    api("PUT", S + "wake/pool", content_type="application/json")
    # The wake stream many instances append to, one of which died mid-append: the
    # subscription function's append of a wake voids that range first.
    die_after_reserving(functions, "wake/pool", b"[]")
    api("PUT", S + "jobs/1", **TEXT)
    pull = {"type": "pull-wake", "streams": ["jobs/1"], "wake_stream": "wake/pool"}
    api("PUT", S + "__ds/subscriptions/pool", pull)
    api("POST", S + "jobs/1", b"job", **TEXT)


def read_all(api: Api, path: str) -> bytes:
    """The stream read from its start until a response says it is up to date."""
    data, offset = b"", "-1"
    for _ in range(20):
        answer = api("GET", S + f"{path}?offset={offset}")
        data += Api.body(answer)
        offset = Api.header(answer, "stream-next-offset")
        if "stream-up-to-date" in {name.lower() for name in answer["headers"]}:
            return data
    raise AssertionError(f"{path} never read up to date")


def die_after_reserving(functions: Functions, path: str, data: bytes) -> None:
    """An API instance that reserved a range and stopped before filling it (its calls are
    the API's: only its death is staged)."""
    store = functions.modules["ApiFunction"]._backend.store
    with acting_as("ApiFunction"):
        info = store.get(path)
        assert info is not None
        store.appender._reserve(info, len(data))


def claim_and_ack(api: Api) -> None:
    """A pull-wake worker claims the wake the subscription function appended, and acks it."""
    claimed = json.loads(
        Api.body(api("POST", S + "__ds/subscriptions/pool/claim", {"worker": "w"}))
    )
    acks = [{"stream": s["path"], "offset": s["tail_offset"]} for s in claimed["streams"]]
    done = {
        "wake_id": claimed["wake_id"],
        "generation": claimed["generation"],
        "acks": acks,
        "done": True,
    }
    api("POST", S + "__ds/subscriptions/pool/ack", done, authorization=f"Bearer {claimed['token']}")


def run_queue(functions: Functions, queue_url: str, quiet_seconds: float = 4.0) -> int:
    """Hand the queue's tasks to the subscription function, as Lambda's SQS poller does,
    until it stays empty (a check is queued a few seconds late)."""
    with acting_as("setup"):
        sqs = boto3.client("sqs")
    ran = 0
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < quiet_seconds:
        with acting_as("setup"):
            messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
                "Messages", []
            )
        if not messages:
            time.sleep(0.3)
            continue
        records = [{"messageId": m["MessageId"], "body": m["Body"]} for m in messages]
        answer = functions.invoke("SubscriptionFunction", {"Records": records})
        assert answer == {"batchItemFailures": []}, answer
        with acting_as("setup"):
            for message in messages:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
        ran += len(messages)
        quiet_since = time.monotonic()
    return ran


def age(table: str, partitions: Callable[[str], bool], attribute: str = "at") -> int:
    """Stand in for an hour passing: the items of the partitions chosen get `attribute` 0."""
    with acting_as("setup"):
        dynamodb = boto3.client("dynamodb")
        aged = 0
        for page in dynamodb.get_paginator("scan").paginate(TableName=table):
            for item in page["Items"]:
                if partitions(item["pk"]["S"]) and attribute in item:
                    dynamodb.update_item(
                        TableName=table,
                        Key={"pk": item["pk"], "sk": item["sk"]},
                        UpdateExpression="SET #a = :zero",
                        ExpressionAttributeNames={"#a": attribute},
                        ExpressionAttributeValues={":zero": {"N": "0"}},
                    )
                    aged += 1
    return aged


def link_items(table: str) -> list[dict[str, Any]]:
    from durable_streams_aws.core.subscriptions.store import LINK_PREFIX

    with acting_as("setup"):
        dynamodb = boto3.client("dynamodb")
        scanned = dynamodb.get_paginator("scan").paginate(TableName=table)
        found = [
            i for page in scanned for i in page["Items"] if i["pk"]["S"].startswith(LINK_PREFIX)
        ]
    assert found, "no stream was linked"
    return found


def restore(table: str, stored: list[dict[str, Any]]) -> None:
    with acting_as("setup"):
        dynamodb = boto3.client("dynamodb")
        for item in stored:
            dynamodb.put_item(TableName=table, Item=item)


def sealer_flows(api: Api, functions: Functions, table: str) -> None:
    """Marked streams, one named stream, every stream; chunks in S3, a segment that grows,
    a dead writer's range the sealer voids, and claims old enough to forget."""
    from durable_streams_aws.core.storage import _items as items

    seal = functools.partial(functions.invoke, "SealerFunction")
    api("PUT", S + "seg/g", b"G" * 40_000, **TEXT)
    api("POST", S + "seg/g", b"H" * 300_000, **TEXT)  # a chunk in S3
    assert seal({"path": "seg/g"})["segments_written"] >= 1
    api("POST", S + "seg/g", b"I" * 20_000, **TEXT)
    api("POST", S + "seg/g", b"", stream_closed="true", **TEXT)
    seal({})  # the marks: the closed streams
    seal({"path": "seg/g"})

    store = functions.modules["ApiFunction"]._backend.store
    api("PUT", S + "hot/v", **TEXT)
    store.recent.mark_hot("hot/v")
    api("POST", S + "hot/v", b"before;", **TEXT)
    die_after_reserving(functions, "hot/v", b"lost;")
    api("POST", S + "hot/v", b"after;", **TEXT)
    seal({"path": "hot/v"})  # the sealer sees the gap first...
    time.sleep(VOID_AFTER + 0.3)
    seal({"path": "hot/v"})  # ...and voids it once it has waited past the bound
    assert age(table, lambda pk: pk.startswith(items.claim_partition(""))) > 0
    forgotten = seal({"path": "hot/h"})
    assert forgotten["items_deleted"] > 0, forgotten
    seal({"all": True})


def rows(start: int, count: int, operation: str = "insert") -> bytes:
    """State Protocol change messages for keys k<start>..., as one JSON append."""
    changes = [
        {
            "type": "row",
            "key": f"k{key}",
            "value": {"n": key, "pad": "p" * 40},
            "headers": {"operation": operation},
        }
        for key in range(start, start + count)
    ]
    return json.dumps(changes).encode()


def retention_flows(api: Api, functions: Functions, table: str) -> None:
    """The retention job of the sealer function (`{"job": "retention"}`), on streams kept by
    size, by age, and compacted (twice, the second fold reading the first snapshot), one whose
    history is not State Protocol (refused), and one deleted since its create listed it (its
    entry dropped): cuts announced (a snapshot item and the stream item in one transaction),
    recorded, and the history below them retired.

    The sealer function runs with DS_RETENTION_DELAY=0 and CompactionMinBytes=1
    (test_roles.py), so that a cut takes effect at once and any sealed history is folded. The
    minute a cut must have been in effect before what it dropped is retired
    (`RetentionRun.retire_grace`) is a setting of the run the function's module built, which
    no environment variable sets: it is set to 0 on that run, standing in for the minute."""
    from durable_streams_aws.core.protocol.offsets import format_offset

    runs: list[dict[str, Any]] = []  # the calls the retention runs made

    def retain() -> dict[str, int]:
        before = len(RECORDS)
        report = dict(functions.invoke("SealerFunction", {"job": "retention"}))
        runs.extend(RECORDS[before:])
        return report

    seal = functools.partial(functions.invoke, "SealerFunction")
    functions.modules["SealerFunction"]._retention.retire_grace = 0.0
    json_type = {"content_type": "application/json"}
    # Appends past SealHotBytes (1024) each, so that sealing leaves a sealed segment behind
    # (an open stream seals whole appends up to that far before its tail).
    api("PUT", S + "ret/bytes", stream_retention="max-bytes=1000", **TEXT)
    api("PUT", S + "ret/age", stream_retention="max-age=1", **TEXT)
    api("PUT", S + "ret/state", stream_retention="compact", **json_type)
    api("PUT", S + "ret/other", stream_retention="compact", **json_type)
    api("PUT", S + "ret/gone", stream_retention="max-age=60", **TEXT)
    for path in ("ret/bytes", "ret/age"):
        for _ in range(4):
            api("POST", S + path, b"R" * 1000, **TEXT)
    api("POST", S + "ret/state", rows(0, 20), **json_type)
    api("POST", S + "ret/state", rows(0, 10, "update"), **json_type)
    api("POST", S + "ret/state", rows(5, 3, "delete"), **json_type)
    api("POST", S + "ret/state", rows(20, 12), **json_type)
    other = json.dumps([{"n": n, "pad": "p" * 40} for n in range(20)]).encode()
    for _ in range(3):
        api("POST", S + "ret/other", other, **json_type)
    api("DELETE", S + "ret/gone")  # its entry in the runs' list stays, for a run to drop
    assert "ret/gone" in retention_entries(table)
    for path in ("ret/bytes", "ret/age", "ret/state", "ret/other"):
        assert seal({"path": path})["segments_written"] >= 1, path
    time.sleep(1.2)  # ret/age's segment is older than its max-age

    announced = retain()
    # By size, by age, and the fold; ret/other's history is no State Protocol.
    assert announced["cuts_announced"] == 3, announced
    assert announced["streams_compacted"] == 1 and announced["bytes_dropped"] > 0, announced
    assert announced["compactions_refused"] == 1, announced
    assert announced["streams_failed"] == 0, announced
    recorded = retain()  # the cuts took effect: recorded, and what they dropped retired
    assert recorded["cuts_recorded"] == 3 and recorded["items_retired"] >= 3, recorded
    assert recorded["compactions_refused"] == 0, recorded  # not read again until it could fold
    for path in ("ret/bytes", "ret/age"):
        api("GET", S + f"{path}?offset={format_offset(0)}", expect=(410,))
    api("GET", S + "ret/state?offset=-1")  # the snapshot, then the history after it

    # The next fold starts from the snapshot; once recorded, the replaced one is retired.
    api("POST", S + "ret/state", rows(32, 20), **json_type)
    api("POST", S + "ret/state", rows(0, 12, "upsert"), **json_type)
    assert seal({"path": "ret/state"})["segments_written"] >= 1
    again = retain()
    assert again["streams_compacted"] == 1, again
    again = retain()
    assert again["cuts_recorded"] == 1 and again["items_retired"] >= 2, again
    api("GET", S + "ret/state?offset=-1")

    assert retention_entries(table) == ["ret/age", "ret/bytes", "ret/other", "ret/state"]

    # Every kind of call a run makes, each made by the sealer function.
    assert {r["function"] for r in runs} == {"SealerFunction"}
    made = {(r["service"], r["operation"]) for r in runs}
    transactions = {tuple(map(tuple, r["TransactItems"])) for r in runs if "TransactItems" in r}
    assert made == {
        ("dynamodb", "Query"),  # the list's shards, sealed spans, what lies below a cut
        ("dynamodb", "GetItem"),  # each listed stream
        ("dynamodb", "TransactWriteItems"),  # a cut announced, with its snapshot item
        ("dynamodb", "UpdateItem"),  # a cut recorded, a compaction refused
        ("dynamodb", "BatchWriteItem"),  # history below a cut retired
        ("dynamodb", "DeleteItem"),  # a gone stream's entry
        ("s3", "GetObject"),  # sealed history and the snapshot folded again
        ("s3", "PutObject"),  # a snapshot
    }, made
    assert transactions == {(("Update", table),), (("Put", table), ("Update", table))}
    read = [r["Key"] for r in runs if r["operation"] == "GetObject"]
    assert any("/snap-" in key for key in read), read  # the second fold read the first snapshot


def retention_entries(table: str) -> list[str]:
    """The paths the retention runs' list names."""
    from durable_streams_aws.core.storage import _items as items

    with acting_as("setup"):
        dynamodb = boto3.client("dynamodb")
        scanned = dynamodb.get_paginator("scan").paginate(TableName=table)
        return sorted(
            i["path"]["S"]
            for page in scanned
            for i in page["Items"]
            if i["pk"]["S"].startswith(items.RETENTION_PREFIX)
        )


def console_flows(api: Api, operator: str) -> None:
    """The console (EnableConsole=true, test_roles.py), as an operator's browser uses it: its
    page, the session, the list of streams, a stream's internals and forks, the
    subscriptions, and the overview, whose rates come from CloudWatch (`CloudWatchRates`,
    every instance's figures, as the functions write them) and its stored figures from a scan.

    The functions write their metrics as EMF lines in their logs, which CloudWatch turns into
    metrics; here a setup step puts the same figures into the emulator's CloudWatch."""
    from durable_streams_aws.functions._metrics import NAMESPACE, SERVICE

    with acting_as("setup"):
        boto3.client("cloudwatch").put_metric_data(
            Namespace=NAMESPACE,
            MetricData=[
                {
                    "MetricName": "Appends",
                    "Dimensions": [{"Name": "service", "Value": SERVICE}],
                    "Value": 7,
                    "Unit": "Count",
                    # A complete minute: the overview leaves out the one in progress.
                    "Timestamp": datetime.now(UTC) - timedelta(minutes=2),
                }
            ],
        )
    console = "/console"
    as_operator = {"authorization": f"Bearer {operator}"}
    page = api("GET", console + "/")
    assert Api.header(page, "content-type").startswith("text/html"), page["headers"]
    api("GET", console + "/api/session", **as_operator)
    api("GET", console + "/api/streams?prefix=json/", **as_operator)
    api("GET", console + "/api/stream/json/p", **as_operator)
    api("GET", console + "/api/forks/ret/state", **as_operator)
    api("GET", console + "/api/subscriptions", **as_operator)

    before = len(RECORDS)
    overview = json.loads(Api.body(api("GET", console + "/api/overview", **as_operator)))
    made = RECORDS[before:]
    rates = overview["rates"]
    assert rates["source"] == "CloudWatch, every instance", rates
    assert sum(value for _, value in rates["series"]["appends"]) == 7, rates
    reads = [r for r in made if r["service"] == "cloudwatch"]
    assert [(r["function"], r["operation"], r["Namespaces"]) for r in reads] == [
        ("ApiFunction", "GetMetricData", [NAMESPACE])
    ], reads


def collector_flows(functions: Functions, table: str) -> dict[str, int]:
    """Deleted streams' incarnations once their grace has passed, and an expired stream
    nobody touched since."""
    from durable_streams_aws.core.storage import _items as items

    retired = [items.retire_partition(shard) for shard in range(items.RETIRE_SHARDS)]
    assert age(table, lambda pk: pk in retired) > 0
    report = dict(functions.invoke("CollectorFunction", {"source": "aws.events"}))
    assert report["incarnations_removed"] > 0 and report["objects_deleted"] > 0, report
    assert report["streams_reaped"] > 0, report
    return report


def main(config_path: str, record_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    from durable_streams_aws.core.auth import mint_token, parse_grants, parse_key_set

    _install_recorder()
    functions = Functions(config)
    keys = parse_key_set(config["auth_keys"])
    token = mint_token(
        keys,
        parse_grants("read,append,create,delete,fork,consume:*"),
        lifetime=3600,
        audience=config["audience"],
    )
    api = Api(functions, token, config["origin_secret"])
    operator = mint_token(
        keys, parse_grants("read,operate:*"), lifetime=3600, audience=config["audience"]
    )
    receiver, wakes = webhook_receiver()
    try:
        api_flows(api, functions, f"http://127.0.0.1:{receiver.server_address[1]}/hook")
        time.sleep(VOID_AFTER + 0.3)  # the wake stream's dead range is due
        assert run_queue(functions, config["queue_url"]) > 0
        assert wakes, "the webhook was never woken"
        claim_and_ack(api)
        links = link_items(config["table"])
        api("DELETE", S + "__ds/subscriptions/orders")
        # A writer that read the subscription before its removal links a stream after it:
        # the sweep drops what the removal could not have seen.
        restore(config["table"], links)
        functions.invoke("SubscriptionFunction", {"source": "aws.events"})  # the sweep
        run_queue(functions, config["queue_url"], quiet_seconds=1.0)
        sealer_flows(api, functions, config["table"])
        retention_flows(api, functions, config["table"])
        console_flows(api, operator)
        collector_flows(functions, config["table"])
    finally:
        receiver.shutdown()
        Path(record_path).write_text(json.dumps(RECORDS))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
