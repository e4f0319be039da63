"""The SAM template: what cfn-lint and `sam validate --lint` check, what they miss, and a
`sam build` whose artifact imports on its own and answers a Function URL event."""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from iam_roles import TEMPLATE, Stack, allows, run_tool, sam_tools, translate

from durable_streams_aws.core.config import Settings, load_settings
from durable_streams_aws.core.console import _rates as rates
from durable_streams_aws.core.runtime import build_backend, ensure_resources
from durable_streams_aws.functions import _metrics as metrics
from durable_streams_aws.infra.emulator import Emulator
from durable_streams_aws.infra.lambda_bridge import function_url_event, lambda_environment

PSEUDO_PARAMETERS = {
    "AWS::AccountId",
    "AWS::Region",
    "AWS::StackName",
    "AWS::StackId",
    "AWS::Partition",
    "AWS::URLSuffix",
    "AWS::NoValue",
    "AWS::NotificationARNs",
}
LAMBDA_RUNTIMES = {"python3.11", "python3.12", "python3.13"}
SNAPSTART_RUNTIMES = {"python3.12", "python3.13"}
DATA_ACTION_PREFIXES = ("dynamodb:", "s3:", "secretsmanager:", "sqs:")


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader: _CfnLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {f"!{suffix}": value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)


def _walk(node: Any) -> Any:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _implicit_names(resources: dict[str, Any]) -> set[str]:
    """Resources SAM generates, such as <Function>Url and <Function>Role."""
    generated = set()
    for name, resource in resources.items():
        if resource["Type"] == "AWS::Serverless::Function":
            generated |= {f"{name}Role", f"{name}Url"}
    return generated


def test_every_reference_resolves() -> None:
    template = load_template()
    resources = template["Resources"]
    known = set(resources) | set(template.get("Parameters", {})) | PSEUDO_PARAMETERS
    known |= _implicit_names(resources)
    for node in _walk(template):
        if not isinstance(node, dict):
            continue
        if "!Ref" in node:
            assert node["!Ref"] in known, f"!Ref {node['!Ref']}"
        if "!GetAtt" in node:
            target = node["!GetAtt"]
            name = target.split(".")[0] if isinstance(target, str) else target[0]
            assert name in known, f"!GetAtt {target}"
        if "!Sub" in node:
            text = node["!Sub"] if isinstance(node["!Sub"], str) else node["!Sub"][0]
            for variable in re.findall(r"\$\{([^}!]+)\}", text):
                assert variable.split(".")[0] in known, f"!Sub ${{{variable}}}"


def test_runtimes_are_real_and_handlers_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    template = load_template()
    runtime = template["Globals"]["Function"]["Runtime"]
    assert runtime in LAMBDA_RUNTIMES
    functions = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::Serverless::Function"
    ]
    assert len(functions) == 4  # the API, the collector, the sealer, subscription delivery
    for function in functions:
        module_name, attribute = function["Properties"]["Handler"].rsplit(".", 1)
        handler = getattr(importlib.import_module(module_name), attribute)
        assert callable(handler)


Conditional = tuple[str | None, dict[str, Any]]


def _conditional_statements(resource: dict[str, Any]) -> Iterator[Conditional]:
    """The permission statements of a SAM function's or an IAM role's inline policies, each
    with the template condition it is granted under (`!If [Condition, statement, NoValue]`)."""
    for policy in resource.get("Properties", {}).get("Policies", []) or []:
        for statement in policy.get("PolicyDocument", policy).get("Statement", []):
            if "!If" in statement:
                condition, granted, otherwise = statement["!If"]
                assert otherwise == {"!Ref": "AWS::NoValue"}, statement
                yield condition, granted
            else:
                yield None, statement


def _statements(resource: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The permission statements of a SAM function's or an IAM role's inline policies."""
    for _, statement in _conditional_statements(resource):
        yield statement


# Reads that IAM authorizes on every resource only (no resource-level permission): the one
# function that may have each, and the condition it has it under.
EVERY_RESOURCE_READS = {"cloudwatch:GetMetricData": ("ApiFunction", "ConsoleOn")}


def test_policies_grant_no_wildcard_actions_on_data() -> None:
    template = load_template()
    for name, resource in template["Resources"].items():
        for condition, statement in _conditional_statements(resource):
            actions = statement["Action"]
            actions = [actions] if isinstance(actions, str) else actions
            if all(EVERY_RESOURCE_READS.get(a) == (name, condition) for a in actions):
                assert statement["Resource"] == "*" and "Condition" not in statement, statement
                continue
            for action in actions:
                assert "*" not in action, f"{name} grants {action}"
                assert action.startswith(DATA_ACTION_PREFIXES), f"{name}: {action}"
            assert statement["Resource"] != "*", f"{name} grants on every resource"


def test_the_console_is_off_by_default_and_reads_the_functions_metrics_when_on() -> None:
    """EnableConsole sets DS_CONSOLE for the API function, which alone serves the console, with
    the namespace the functions write their metrics to; the statement that lets its overview
    read them back is granted only under ConsoleOn."""
    template = load_template()
    parameter = template["Parameters"]["EnableConsole"]
    assert (parameter["Default"], parameter["AllowedValues"]) == ("false", ["true", "false"])
    assert template["Conditions"]["ConsoleOn"] == {"!Equals": [{"!Ref": "EnableConsole"}, "true"]}
    resources = template["Resources"]
    api = resources["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api["DS_CONSOLE"] == {"!Ref": "EnableConsole"}
    written = template["Globals"]["Function"]["Environment"]["Variables"]
    assert api["DS_CONSOLE_METRICS_NAMESPACE"] == written["POWERTOOLS_METRICS_NAMESPACE"]
    assert api["DS_CONSOLE_METRICS_NAMESPACE"] == metrics.NAMESPACE
    assert rates.SERVICE == metrics.SERVICE  # the dimension the overview's queries name
    assert "DS_CONSOLE" not in written
    reads = [
        (name, condition, statement)
        for name, resource in resources.items()
        for condition, statement in _conditional_statements(resource)
        if any(action.startswith("cloudwatch:") for action in statement["Action"])
    ]
    assert [(name, condition, statement["Action"]) for name, condition, statement in reads] == [
        ("ApiFunction", "ConsoleOn", ["cloudwatch:GetMetricData"])
    ]


@pytest.mark.parametrize("enabled", ["true", "false"])
def test_the_console_parameter_becomes_the_api_functions_settings(
    enabled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the API function loads from the environment SAM gives it (Globals merged in)."""
    stack = Stack(_translated(), {"EnableConsole": enabled})
    for name in list(os.environ):
        if name.startswith("DS_"):
            monkeypatch.delenv(name)
    for name, value in stack.environment("ApiFunction").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "api")
    settings = load_settings()
    assert settings.console is (enabled == "true")
    assert settings.console_path == "/console"
    assert settings.console_metrics_namespace == metrics.NAMESPACE
    granted = stack.statements(stack.role_of("ApiFunction"))
    assert allows(granted, "cloudwatch:GetMetricData", "*") is (enabled == "true")


@functools.cache
def _translated() -> dict[str, Any]:
    return translate()


def test_only_the_api_reads_the_token_keys_and_the_origin_secret() -> None:
    """...and the webhook signing seed, which the subscription function reads too."""
    template = load_template()
    secret_grants = {
        (name, action, str(statement["Resource"]))
        for name, resource in template["Resources"].items()
        for statement in _statements(resource)
        for action in statement["Action"]
        if action.startswith("secretsmanager:")
    }
    api_secrets = [{"!Ref": "AuthKeys"}, {"!Ref": "OriginSecret"}, {"!Ref": "WebhookSigningSecret"}]
    assert secret_grants == {
        ("ApiFunction", "secretsmanager:GetSecretValue", str(api_secrets)),
        (
            "SubscriptionRole",
            "secretsmanager:GetSecretValue",
            str({"!Ref": "WebhookSigningSecret"}),
        ),
    }
    api = template["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"]
    assert api["DS_AUTH_SECRET_ID"] == {"!Ref": "AuthKeys"}
    assert api["DS_AUTH"] == {"!If": ["AccessControlOn", "true", "false"]}
    assert template["Parameters"]["AccessControl"]["Default"] == "on"


def test_subscription_delivery_runs_from_its_queue_and_a_sweep_with_least_privilege() -> None:
    template = load_template()
    resources = template["Resources"]
    function = resources["SubscriptionFunction"]["Properties"]
    assert function["Handler"] == "durable_streams_aws.functions.subscriptions.handler"
    events = function["Events"]
    assert events["Tasks"]["Type"] == "SQS"
    assert events["Tasks"]["Properties"]["Queue"] == {"!GetAtt": "SubscriptionTasks.Arn"}
    assert events["Sweep"]["Type"] == "Schedule"
    queue = resources["SubscriptionTasks"]["Properties"]
    # Lambda's advice: six times the timeout, so a batch being run is never handed out twice.
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "!GetAtt": "SubscriptionTaskFailures.Arn"
    }
    # Its role is the stack's own, not SAM's: SAM would attach AWSLambdaSQSQueueExecutionRole,
    # which may receive from every queue in the account. What the role grants is checked
    # against what the function's code calls in tests/deploy/test_roles.py.
    assert function["Role"] == {"!GetAtt": "SubscriptionRole.Arn"} and "Policies" not in function
    # Both functions queue to it and read the same signing seed.
    for name in ("ApiFunction", "SubscriptionFunction"):
        variables = resources[name]["Properties"]["Environment"]["Variables"]
        assert variables["DS_SUBSCRIPTION_QUEUE_URL"] == {"!Ref": "SubscriptionTasks"}
        assert variables["DS_WEBHOOK_SECRET_ID"] == {"!Ref": "WebhookSigningSecret"}


def test_the_sealer_runs_on_a_schedule_and_may_touch_only_what_sealing_needs() -> None:
    template = load_template()
    sealer = template["Resources"]["SealerFunction"]["Properties"]
    assert sealer["Handler"] == "durable_streams_aws.functions.sealer.handler"
    schedule = sealer["Events"]["Schedule"]
    assert schedule["Type"] == "Schedule"
    assert schedule["Properties"]["Schedule"] == {"!Ref": "SealerSchedule"}
    # What its role grants is checked against what its code calls in tests/deploy/test_roles.py.
    # The API function and the sealer agree on when a stream is marked for sealing.
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["DS_SEAL_HOT_BYTES"] == {"!Ref": "SealHotBytes"}
    assert variables["DS_SEGMENT_BYTES"] == {"!Ref": "SegmentBytes"}


def test_the_spark_jobs_are_off_by_default_and_their_role_reaches_only_the_store() -> None:
    template = load_template()
    assert template["Parameters"]["EnableSparkJobs"]["Default"] == "false"
    spark = {"SparkApplication", "SparkJobRole"}
    for name in spark:
        assert template["Resources"][name]["Condition"] == "SparkJobs"
    for name, output in template["Outputs"].items():
        if name.startswith("Spark"):
            assert output["Condition"] == "SparkJobs"
    role = template["Resources"]["SparkJobRole"]
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"]["Service"] for s in trust] == ["emr-serverless.amazonaws.com"]
    resources = [
        resource
        for statement in _statements(role)
        for resource in (
            statement["Resource"]
            if isinstance(statement["Resource"], list)
            else [statement["Resource"]]
        )
    ]
    for resource in resources:
        text = json.dumps(resource)
        assert "StreamsTable" in text or "DataBucket" in text, resource
    writes = [
        s for s in _statements(role) if {"s3:PutObject", "s3:DeleteObject"} & set(s["Action"])
    ]
    assert [r["!Sub"] for s in writes for r in s["Resource"]] == [
        "${DataBucket.Arn}/exports/*",
        "${DataBucket.Arn}/checkpoints/*",
    ]


def test_the_api_function_starts_from_snapshots_behind_its_alias() -> None:
    """SnapStart applies to published versions only: the function publishes one whenever it
    changes, and everything that calls it (the Function URL, so CloudFront) calls the alias."""
    template = load_template()
    assert template["Globals"]["Function"]["Runtime"] in SNAPSTART_RUNTIMES
    assert template["Parameters"]["EnableSnapStart"]["Default"] == "true"
    on = {"!Equals": [{"!Ref": "EnableSnapStart"}, "true"]}
    assert template["Conditions"]["SnapStartOn"] == on
    api = template["Resources"]["ApiFunction"]["Properties"]
    assert api["AutoPublishAlias"] == "live"
    assert api["AutoPublishAliasAllProperties"] is True
    assert api["VersionDeletionPolicy"] == "Delete"  # and their snapshots, billed while kept
    assert api["SnapStart"] == {"ApplyOn": {"!If": ["SnapStartOn", "PublishedVersions", "None"]}}
    assert "FunctionUrlConfig" in api
    # The scheduled functions gain nothing from a faster start: no snapshots to pay for.
    for name in ("CollectorFunction", "SealerFunction"):
        properties = template["Resources"][name]["Properties"]
        assert "SnapStart" not in properties and "AutoPublishAlias" not in properties


def test_the_function_url_and_its_permissions_are_the_aliass() -> None:
    """What SAM makes of the template: the URL (which CloudFront's origin names) targets the
    alias, not the unpublished $LATEST that no snapshot serves."""
    resources = translate()["Resources"]
    alias = {"Ref": "ApiFunctionAliaslive"}
    assert resources["ApiFunctionAliaslive"]["Type"] == "AWS::Lambda::Alias"
    version = resources["ApiFunctionAliaslive"]["Properties"]["FunctionVersion"]["Fn::GetAtt"][0]
    assert resources[version]["DeletionPolicy"] == "Delete"
    assert resources["ApiFunctionUrl"]["Properties"]["TargetFunctionArn"] == alias
    permissions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"]
    url_permissions = [
        p["Properties"] for p in permissions if "Url" in json.dumps(p) or "Via" in json.dumps(p)
    ]
    assert url_permissions
    assert all(p["FunctionName"] == alias for p in url_permissions)


def test_cfn_lint_and_sam_validate_pass() -> None:
    tools = sam_tools()
    lint = run_tool([str(tools / "cfn-lint"), str(TEMPLATE)])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    validate = run_tool([str(tools / "sam"), "validate", "--lint", "--template", str(TEMPLATE)])
    assert validate.returncode == 0, validate.stdout + validate.stderr


_INVOKE = """
import json, sys, types
from durable_streams_aws.functions.api import handler
context = types.SimpleNamespace(
    function_name="artifact-test", function_version="$LATEST", memory_limit_in_mb=512,
    invoked_function_arn="arn:aws:lambda:us-east-1:000000000000:function:artifact-test",
    aws_request_id="req-1", get_remaining_time_in_millis=lambda: 30000,
)
for event in json.loads(sys.stdin.read()):
    print(json.dumps(handler(event, context)))
"""


_IMPORT_DELIVERY = """
from durable_streams_aws.functions.subscriptions import handler
from durable_streams_aws.core.subscriptions.webhooks import WebhookSender
from durable_streams_aws.core.subscriptions._signing import SigningKey
assert callable(handler) and WebhookSender and SigningKey.generate().kid.startswith("ds_")
"""


def _runtime_python(runtime: str) -> Path | None:
    """An interpreter of the template's runtime (`python3.13`): on PATH, or one that pyenv
    keeps but does not put there. `sam build` needs it, and so does running the artifact
    (its compiled dependencies are built for that version)."""
    version = runtime.removeprefix("python")
    candidates = [shutil.which(runtime)]
    candidates += sorted((Path.home() / ".pyenv" / "versions").glob(f"{version}.*/bin/{runtime}"))
    for candidate in candidates:
        if candidate is None:
            continue
        answer = subprocess.run([str(candidate), "--version"], capture_output=True, text=True)
        if answer.returncode == 0:  # a pyenv shim of a version not selected answers 127
            return Path(candidate)
    return None


def test_sam_build_artifact_answers_function_url_events(tmp_path: Path, emulator: Emulator) -> None:
    tools = sam_tools()
    python = _runtime_python(load_template()["Globals"]["Function"]["Runtime"])
    if python is None:
        pytest.skip("no interpreter of the template's runtime on this machine")
    build_dir = tmp_path / "build"
    built = run_tool(
        [
            str(tools / "sam"),
            "build",
            "--template",
            str(TEMPLATE),
            "--build-dir",
            str(build_dir),
            "--parameter-overrides",
            "Architecture=x86_64",
        ],
        timeout=600,
        path_first=python.parent,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    artifact = build_dir / "ApiFunction"
    assert not (artifact / "node_modules").exists()
    with Emulator() as emulator:
        settings = Settings(table="artifact", bucket="artifact-data")
        ensure_resources(build_backend(settings, endpoint=emulator.endpoint))
        events = [
            function_url_event(
                "PUT", "/v1/stream/a", [("content-type", "text/plain")], b"hello", "127.0.0.1"
            ),
            function_url_event("GET", "/v1/stream/a?offset=-1", [], b"", "127.0.0.1"),
        ]
        # -S: no site-packages, so everything must come from the artifact itself.
        run = subprocess.run(
            [str(python), "-S", "-c", _INVOKE],
            input=json.dumps(events),
            cwd=artifact,
            env={
                "PYTHONPATH": str(artifact),
                **lambda_environment(emulator.endpoint, "artifact", "artifact-data"),
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
        # The subscription function's artifact: its handler, and the webhook sender it
        # loads only when it first delivers (httpx), come from the artifact too.
        delivery = build_dir / "SubscriptionFunction"
        imported = subprocess.run(
            [str(python), "-S", "-c", _IMPORT_DELIVERY],
            cwd=delivery,
            env={
                "PYTHONPATH": str(delivery),
                **lambda_environment(emulator.endpoint, "artifact", "artifact-data"),
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 0, run.stderr[-3000:]
    answers = [json.loads(line) for line in run.stdout.splitlines() if '"statusCode"' in line]
    assert [a["statusCode"] for a in answers] == [201, 200]
    assert answers[1]["body"] == "hello"
    assert imported.returncode == 0, imported.stderr[-3000:]


def test_the_api_function_knows_its_timeout_and_every_allowed_setting_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The function refuses settings whose waits outlast its timeout: the timeout it is told
    must be its real one, and no parameter value the template allows may be refused."""
    template = load_template()
    api = template["Resources"]["ApiFunction"]["Properties"]
    told = api["Environment"]["Variables"]["DS_FUNCTION_TIMEOUT"]
    assert float(told) == float(api["Timeout"])
    parameters = template["Parameters"]
    largest = {
        "DS_LONG_POLL_TIMEOUT": parameters["LongPollTimeout"]["MaxValue"],
        "DS_MAX_READ_BYTES": parameters["MaxReadBytes"]["MaxValue"],
        "DS_MAX_APPEND_BYTES": parameters["MaxAppendBytes"]["MaxValue"],
        "DS_FUNCTION_TIMEOUT": told,
        "AWS_LAMBDA_FUNCTION_NAME": "api",
    }
    for name, value in largest.items():
        monkeypatch.setenv(name, str(value))
    settings = load_settings()
    assert settings.long_poll_timeout == parameters["LongPollTimeout"]["MaxValue"]
