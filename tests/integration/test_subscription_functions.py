"""The deployment's shape, end to end on the emulator: the API function queues a task in SQS,
the subscription function runs it from an SQS event, delivers the webhook, and its answer
acks the wake; the schedule's event runs the sweep."""

from __future__ import annotations

import json
import os
import time
import uuid

import boto3
from support import emf_records, invoke_function, values_of, webhook_receiver

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import build_backend, ensure_resources
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.lambda_bridge import function_url_event, lambda_environment


def test_a_webhook_wake_travels_through_sqs_and_the_subscription_function(
    emulator: Emulator,
) -> None:
    name = f"fn-subs-{uuid.uuid4().hex[:8]}"
    ensure_resources(build_backend(Settings(table=name, bucket=name), emulator.endpoint))
    sqs = boto3.client("sqs", endpoint_url=emulator.endpoint, region_name="us-east-1")
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    env = {
        **os.environ,
        **lambda_environment(emulator.endpoint, name, name),
        "DS_SUBSCRIPTION_QUEUE_URL": queue,
        "DS_WEBHOOK_SECRET": "functions test",
        "DS_WEBHOOK_ALLOW_LOCALHOST": "true",  # the receiver below is local
    }
    server, wakes = webhook_receiver()
    try:
        hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
        subscription = {"type": "webhook", "pattern": "orders/*", "webhook": {"url": hook}}
        json_type = [("content-type", "application/json")]
        api_events = [
            function_url_event(
                "PUT",
                "/v1/stream/__ds/subscriptions/orders",
                json_type,
                json.dumps(subscription).encode(),
                "::1",
            ),
            function_url_event(
                "PUT", "/v1/stream/orders/1", [("content-type", "text/plain")], b"first", "::1"
            ),
        ]
        answers, _ = invoke_function("durable_streams_aws.functions.api.handler", api_events, env)
        assert [a["statusCode"] for a in answers] == [201, 201]

        # Run the queue's tasks through the subscription function until it is empty (the
        # creation's check arrives a few seconds late, as its delay says).
        kinds: list[str] = []
        printed: list[str] = []
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 5:
            received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)
            messages = received.get("Messages", [])
            if not messages:
                time.sleep(0.5)
                continue
            kinds += [json.loads(m["Body"])["kind"] for m in messages]
            event = {"Records": [{"body": m["Body"]} for m in messages]}
            answered, lines = invoke_function(
                "durable_streams_aws.functions.subscriptions.handler", [event], env
            )
            assert answered == [{"batchItemFailures": []}]
            printed += lines
            for message in messages:
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
            quiet_since = time.monotonic()

        assert sorted(kinds) == ["check", "deliver", "notice"]
        assert len(wakes) == 1 and wakes[0]["streams"][0]["path"] == "orders/1"
        state, _ = invoke_function(
            "durable_streams_aws.functions.api.handler",
            [function_url_event("GET", "/v1/stream/__ds/subscriptions/orders", [], b"", "::1")],
            env,
        )
        streams = json.loads(state[0]["body"])["streams"]
        assert streams == [
            {
                "path": "orders/1",
                "link_type": "glob",
                "acked_offset": "0" * 16 + "_" + "5".zfill(16),
                "skipped": None,  # never moved up to a stream's earliest retained offset
            }
        ]
        # The schedule's event: a sweep, with nothing left to do.
        swept, lines = invoke_function(
            "durable_streams_aws.functions.subscriptions.handler", [{"source": "aws.events"}], env
        )
        assert swept == [{"swept": 1}] and len(wakes) == 1
        # The function reported the delivery, and the sweep what it found outstanding.
        assert values_of(emf_records(printed), "WebhookDeliveries") == [1.0]
        assert values_of(emf_records(printed), "WebhookFailures") == []
        assert values_of(emf_records(lines), "PendingWakes") == [0.0]
        assert values_of(emf_records(lines), "OldestPendingWakeAge") == [0.0]
    finally:
        server.shutdown()
