"""Each Lambda function's role against the calls its own code makes.

Moto checks no IAM, so a grant missing from `template.yaml` passes every other test and fails
only in a deployment. Here each function runs its flows on the emulator (`role_flows.py`, in
a process of its own) with every AWS call recorded, every action inside a transaction counted
as the IAM action it needs; SAM's translator turns the template into the roles CloudFormation
creates; and each recorded (action, resource) must be allowed by the function's role. The
other way round, each grant must be used by some flow (least privilege), except the few below
that are deliberate.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import boto3
import pytest
from iam_roles import (
    MANAGED_POLICIES,
    TEMPLATE,
    Need,
    Stack,
    Statement,
    allows,
    covers,
    needs,
    translate,
)

from durable_streams_aws.core.config import Settings
from durable_streams_aws.core.runtime import build_backend, ensure_resources
from durable_streams_aws.infra.emulator import Emulator

HERE = Path(__file__).resolve().parent
# The flows run with the template's defaults except these, which a deployment may choose too:
# listing and the console on (to run their routes), a short long-poll, small segments and seal
# marks (so that a few hundred kilobytes seal into segments that grow), and compaction of any
# sealed history.
PARAMETERS = {
    "EnableListing": "true",
    "EnableConsole": "true",
    "LongPollTimeout": "1",
    "SealHotBytes": "1024",
    "SegmentBytes": "65536",
    "CompactionMinBytes": "1",
}
# The webhook receiver is on this machine, which a deployment refuses unless told.
TEST_ONLY_ENV = {"DS_WEBHOOK_ALLOW_LOCALHOST": "true"}
# Per function: retention cuts that take effect at once (a deployment announces them as long
# ahead as a cache may keep a read), so that one run announces a cut and the next records it.
TEST_ONLY_FUNCTION_ENV = {"SealerFunction": {"DS_RETENTION_DELAY": "0"}}

# Grants no flow of the function's code uses, each for a reason.
DELIBERATE = {
    ("*", "s3:ListBucket", "DataBucket"): (
        "S3 answers a GET of a missing object 404 (NoSuchKey) only to a principal that may list"
        " the bucket, 403 otherwise; the store retries a read whose object the collector"
        " replaced and deleted only on 404"
    ),
    ("*", "sqs:SendMessage", "ScheduledRunFailures"): (
        "Lambda, not the code, sends a scheduled run that failed three times to the function's"
        " DeadLetterQueue, as the role"
    ),
    ("SubscriptionFunction", "sqs:ReceiveMessage", "SubscriptionTasks"): (
        "Lambda's SQS poller receives the tasks as the function's role"
    ),
    ("SubscriptionFunction", "sqs:DeleteMessage", "SubscriptionTasks"): (
        "Lambda's SQS poller deletes the tasks the function ran"
    ),
    ("SubscriptionFunction", "sqs:GetQueueAttributes", "SubscriptionTasks"): (
        "Lambda checks the queue when it creates the event source mapping"
    ),
}
PLATFORM_MANAGED_POLICIES = {
    # CloudWatch Logs for the function's own log group, which Lambda writes.
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
}


def _random_text(length: int) -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(length))


def _secret_value(properties: dict[str, Any]) -> str:
    """A value of the shape `GenerateSecretString` gives the secret."""
    generated = properties["GenerateSecretString"]
    value = _random_text(generated["PasswordLength"])
    if "GenerateStringKey" in generated:
        document = json.loads(generated["SecretStringTemplate"])
        document[generated["GenerateStringKey"]] = value
        return json.dumps(document)
    return value


def _create_stack(emulator: Emulator, translated: dict[str, Any]) -> tuple[Stack, dict[str, Any]]:
    """The stack's table, bucket, queues and secrets on the emulator, named apart from any
    other test's; the stack resolved against them; what the flows need to know."""
    suffix = uuid.uuid4().hex[:10]
    resources = translated["Resources"]
    physical: dict[str, dict[str, str]] = {}
    settings = Settings(table=f"roles-{suffix}", bucket=f"roles-{suffix}")
    ensure_resources(build_backend(settings, endpoint=emulator.endpoint))
    (table,) = [n for n, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table"]
    (bucket,) = [n for n, r in resources.items() if r["Type"] == "AWS::S3::Bucket"]
    physical[table] = {
        "Ref": settings.table,
        "Arn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{settings.table}",
    }
    physical[bucket] = {"Ref": settings.bucket, "Arn": f"arn:aws:s3:::{settings.bucket}"}
    client = {"endpoint_url": emulator.endpoint, "region_name": "us-east-1"}
    sqs = boto3.client("sqs", **client)
    secretsmanager = boto3.client("secretsmanager", **client)
    values: dict[str, str] = {}
    for name, resource in resources.items():
        if resource["Type"] == "AWS::SQS::Queue":
            url = sqs.create_queue(QueueName=f"{name}-{suffix}")["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            physical[name] = {"Ref": url, "Arn": arn["Attributes"]["QueueArn"]}
        elif resource["Type"] == "AWS::SecretsManager::Secret":
            values[name] = _secret_value(resource["Properties"])
            created = secretsmanager.create_secret(
                Name=f"{name}-{suffix}", SecretString=values[name]
            )
            physical[name] = {"Ref": created["ARN"]}
    stack = Stack(translated, PARAMETERS, physical)
    flows = {
        "table": settings.table,
        "queue_url": physical["SubscriptionTasks"]["Ref"],
        "auth_keys": values["AuthKeys"],
        "origin_secret": json.loads(values["OriginSecret"])["current"],
        "audience": stack.parameter("AuthAudience"),
        "functions": {
            name: {
                "handler": stack.handler(name),
                "env": {
                    **stack.environment(name),
                    **TEST_ONLY_ENV,
                    **TEST_ONLY_FUNCTION_ENV.get(name, {}),
                },
            }
            for name in stack.functions()
        },
    }
    return stack, flows


def _run_flows(emulator: Emulator, flows: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    config, record = tmp / "flows.json", tmp / "calls.json"
    config.write_text(json.dumps(flows))
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": emulator.endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "emulator",
        "AWS_SECRET_ACCESS_KEY": "emulator",
        "AWS_LAMBDA_FUNCTION_NAME": "dsaws-roles",
        # iam_roles beside it, tests/support.py, and the repository's root (benchmarks).
        "PYTHONPATH": os.pathsep.join(
            [str(HERE), str(HERE.parent), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]
        ),
    }
    run = subprocess.run(
        [sys.executable, str(HERE / "role_flows.py"), str(config), str(record)],
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert run.returncode == 0, run.stderr[-6000:]
    return list(json.loads(record.read_text()))


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    return translate()


@pytest.fixture(scope="module")
def recorded(
    emulator: Emulator, translated: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Stack, dict[str, list[Need]]]:
    """Every IAM action on a resource each function's flows needed."""
    stack, flows = _create_stack(emulator, translated)
    calls = _run_flows(emulator, flows, tmp_path_factory.mktemp("roles"))
    needed: dict[str, list[Need]] = defaultdict(list)
    for call in calls:
        needed[call["function"]].extend(needs(call))
    return stack, dict(needed)


def _logical_of(stack: Stack, resource: str) -> str:
    """The logical id whose resource a granted ARN names (or the ARN itself)."""
    for logical, names in stack.physical.items():
        for value in names.values():
            if resource == value or resource.startswith(value + "/"):
                return logical
    return resource


def refused(stack: Stack, needed: dict[str, list[Need]]) -> list[str]:
    """Each recorded (action, resource) a function's role does not allow."""
    problems = []
    for function in stack.functions():
        role = stack.role_of(function)
        statements = stack.statements(role)
        for arn in stack.managed_policies(role):
            statements += MANAGED_POLICIES[arn]
        for need in sorted(set(needed.get(function, [])), key=str):
            if not allows(statements, need.action, need.resource):
                problems.append(f"{function} may not {need.action} on {need.resource}")
    return problems


def unused(stack: Stack, needed: dict[str, list[Need]]) -> list[str]:
    """Each grant of a function's role that no flow of it used and that is not deliberate."""
    problems = []
    for function in stack.functions():
        role = stack.role_of(function)
        for arn in stack.managed_policies(role):
            if arn not in PLATFORM_MANAGED_POLICIES:
                problems.append(f"{function}'s role has the managed policy {arn}")
        for statement in stack.statements(role):
            for action, resource in statement.grants():
                logical = _logical_of(stack, resource)
                if (function, action, logical) in DELIBERATE or (
                    "*",
                    action,
                    logical,
                ) in DELIBERATE:
                    continue
                used = any(
                    covers(action, resource, need.action, need.resource)
                    for need in needed.get(function, [])
                )
                if not used:
                    problems.append(f"{function} is granted {action} on {resource}, unused")
    return problems


def test_every_call_a_function_makes_is_allowed_by_its_role(
    recorded: tuple[Stack, dict[str, list[Need]]],
) -> None:
    stack, needed = recorded
    assert set(needed) - {"setup"} == set(stack.functions()), "a function made no call"
    assert refused(stack, needed) == []


def test_every_grant_is_used_by_a_flow_or_deliberate(
    recorded: tuple[Stack, dict[str, list[Need]]],
) -> None:
    stack, needed = recorded
    problems = unused(stack, needed)
    assert problems == [], "\n".join(problems)


def test_the_roles_before_this_check_fail_it(
    recorded: tuple[Stack, dict[str, list[Need]]],
) -> None:
    """The three grants a deployment lacked before this check existed: without them, the
    check names exactly those calls."""
    stack, needed = recorded
    gaps = (
        "dynamodb:ConditionCheckItem # a dead writer's range",
        "dynamodb:BatchWriteItem # claims of reserved ranges",
        "dynamodb:BatchWriteItem # a removed subscription's links",
    )
    lines = TEMPLATE.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not any(gap in line for gap in gaps)]
    assert len(lines) - len(kept) == len(gaps)
    text = "".join(kept)
    before = Stack(translate(text), stack.parameters, stack.physical)
    table = stack.physical["StreamsTable"]["Arn"]
    assert refused(before, needed) == [
        f"SealerFunction may not dynamodb:BatchWriteItem on {table}",
        f"SealerFunction may not dynamodb:ConditionCheckItem on {table}",
        f"SubscriptionFunction may not dynamodb:BatchWriteItem on {table}",
    ]


def test_functions_that_read_objects_that_may_vanish_get_404_for_them(
    recorded: tuple[Stack, dict[str, list[Need]]],
) -> None:
    """A function that reads data objects may also list the bucket, or S3 would answer 403
    for an object the collector deleted, and the store would not retry the read."""
    stack, needed = recorded
    bucket = stack.physical["DataBucket"]["Arn"]
    readers = {f for f, wanted in needed.items() if any(n.action == "s3:GetObject" for n in wanted)}
    assert readers - {"setup"} == {"ApiFunction", "SealerFunction"}
    for function in readers - {"setup"}:
        assert allows(stack.statements(stack.role_of(function)), "s3:ListBucket", bucket)


# Actions with no resource-level permission, which IAM authorizes on "*" only: which function
# may have each.
EVERY_RESOURCE_ONLY = {"cloudwatch:GetMetricData": {"ApiFunction"}}


def test_no_role_grants_a_queue_or_table_action_on_every_resource(
    translated: dict[str, Any],
) -> None:
    stack = Stack(translated, PARAMETERS)
    for function in stack.functions():
        role = stack.role_of(function)
        granted: list[Statement] = list(stack.statements(role))
        for arn in stack.managed_policies(role):
            granted += MANAGED_POLICIES[arn]
        for statement in granted:
            for action, resource in statement.grants():
                if resource == "*":
                    allowed = action.startswith("logs:") or function in EVERY_RESOURCE_ONLY.get(
                        action, set()
                    )
                    assert allowed, f"{function}: {action} on *"


def test_the_console_overview_reads_cloudwatch_only_with_the_console_on(
    recorded: tuple[Stack, dict[str, list[Need]]],
) -> None:
    """The overview's one GetMetricData call (the console's flow) is the API role's only need
    that the ConsoleOn statement meets: without the console, that call alone is refused, and no
    role may read metrics."""
    stack, needed = recorded
    rates = Need("cloudwatch:GetMetricData", "*")
    assert rates in needed["ApiFunction"]
    assert [f for f, wanted in needed.items() if rates in wanted] == ["ApiFunction"]
    off = Stack(stack.template, {**PARAMETERS, "EnableConsole": "false"}, stack.physical)
    assert refused(off, needed) == ["ApiFunction may not cloudwatch:GetMetricData on *"]
    for function in off.functions():
        assert not allows(off.statements(off.role_of(function)), rates.action, rates.resource)
    assert off.environment("ApiFunction")["DS_CONSOLE"] == "false"
    assert stack.environment("ApiFunction")["DS_CONSOLE"] == "true"


def test_the_grants_lambda_itself_needs_are_there(
    recorded: tuple[Stack, dict[str, list[Need]]],
) -> None:
    """No code of ours calls these, so no flow records them; without them the deployment
    fails all the same: Lambda refuses a dead-letter queue its role may not send to, and an
    SQS event source whose queue the role may not read (SAM adds neither to a role it did
    not generate)."""
    stack, _ = recorded
    for function in stack.functions():
        properties = stack.resources[function]["Properties"]
        role = stack.role_of(function)
        granted = stack.statements(role)
        for arn in stack.managed_policies(role):
            granted += MANAGED_POLICIES[arn]
        target = properties.get("DeadLetterConfig", {}).get("TargetArn")
        if target is not None:
            assert allows(granted, "sqs:SendMessage", stack.resolve(target)), function
    mappings = [
        r["Properties"]
        for r in stack.resources.values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping"
    ]
    assert mappings, "no SQS event source"
    for mapping in mappings:
        function = mapping["FunctionName"]["Ref"]
        role = stack.role_of(function)
        granted = stack.statements(role) + [
            s for arn in stack.managed_policies(role) for s in MANAGED_POLICIES[arn]
        ]
        queue = stack.resolve(mapping["EventSourceArn"])
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
            assert allows(granted, action, queue), (function, action)
