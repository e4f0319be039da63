"""The IAM side of the deployment, for the tests: what AWS call needs which IAM action on which
resource, the SAM-translated template's intrinsic functions resolved to the names a test
stack gave its resources, and whether a role's statements allow an (action, resource).

Pure: no AWS, no emulator. `tests/deploy/role_flows.py` records the calls; this module judges
them against `template.yaml` as SAM translates it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import venv
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
TEMPLATE = ROOT / "template.yaml"
TOOLS = Path.home() / ".cache" / "durable-streams-aws" / "tools"
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account, so that ARNs moto hands out match
PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::StackName": "dsaws-roles",
    "AWS::URLSuffix": "amazonaws.com",
}
NO_VALUE = object()


# ---------------------------------------------------------------------- SAM's translation


def sam_tools() -> Path:
    """cfn-lint and aws-sam-cli in a virtual environment of their own (sam pins its boto3)."""
    binaries = TOOLS / "bin"
    if not (binaries / "sam").exists() or not (binaries / "cfn-lint").exists():
        venv.create(TOOLS, with_pip=True)
        subprocess.run(
            [
                str(binaries / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "aws-sam-cli",
                "cfn-lint",
            ],
            check=True,
        )
    return binaries


def run_tool(
    command: list[str], path_first: Path | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": REGION}
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, **kwargs)


_TRANSLATE = """
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

class NoManagedPolicies:
    def load(self):
        return {}

template = yaml_parse(sys.stdin.read())
print(json.dumps(transform(template, {}, NoManagedPolicies())))
"""


def translate(template_text: str | None = None) -> dict[str, Any]:
    """The template as CloudFormation receives it after SAM's transform: every role SAM
    generates, with the statements and managed policies it adds."""
    text = TEMPLATE.read_text() if template_text is None else template_text
    # SAM checks that a code location is an S3 URI; `sam deploy` puts one there.
    text = text.replace("CodeUri: .", "CodeUri: s3://bucket/key")
    translated = run_tool([str(sam_tools() / "python"), "-c", _TRANSLATE], input=text)
    assert translated.returncode == 0, translated.stderr[-3000:]
    return dict(json.loads(translated.stdout))


# ---------------------------------------------------------------------- intrinsic functions


@dataclass
class Stack:
    """A translated template with its parameters chosen and its resources named: enough to
    resolve `Ref`, `Fn::GetAtt`, `Fn::Sub`, `Fn::If` and `Fn::Join` as CloudFormation would."""

    template: dict[str, Any]
    parameters: Mapping[str, str] = field(default_factory=dict)
    # Logical id -> {"Ref": ..., "Arn": ...} for the resources a test created.
    physical: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @property
    def resources(self) -> dict[str, Any]:
        return dict(self.template["Resources"])

    def parameter(self, name: str) -> str:
        if name in self.parameters:
            return str(self.parameters[name])
        return str(self.template["Parameters"][name].get("Default", ""))

    def attribute(self, logical: str, name: str) -> str:
        given = self.physical.get(logical, {})
        if name in given:
            return given[name]
        kind = self.resources[logical]["Type"]
        service = kind.split("::")[1].lower()
        if name == "Arn":
            return f"arn:aws:{service}:{REGION}:{ACCOUNT}:{logical}"
        if name == "Ref":
            return f"{logical}-physical-id"
        return f"{logical}.{name}"

    def condition(self, name: str) -> bool:
        return bool(self._evaluate(self.template["Conditions"][name]))

    def _evaluate(self, node: Any) -> Any:
        if isinstance(node, dict) and len(node) == 1:
            ((key, value),) = node.items()
            if key == "Fn::Equals":
                left, right = (self.resolve(v) for v in value)
                return str(left) == str(right)
            if key == "Fn::Not":
                return not self._evaluate(value[0])
            if key == "Fn::And":
                return all(self._evaluate(v) for v in value)
            if key == "Fn::Or":
                return any(self._evaluate(v) for v in value)
            if key == "Condition":
                return self.condition(value)
        return self.resolve(node)

    def resolve(self, node: Any) -> Any:
        if isinstance(node, list):
            resolved = [self.resolve(item) for item in node]
            return [item for item in resolved if item is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            if key == "Ref":
                return self._ref(value)
            if key == "Fn::GetAtt":
                logical, name = value if isinstance(value, list) else value.split(".", 1)
                return self.attribute(logical, name)
            if key == "Fn::Sub":
                return self._sub(value)
            if key == "Fn::If":
                condition, then, otherwise = value
                return self.resolve(then if self.condition(condition) else otherwise)
            if key == "Fn::Join":
                separator, items = value
                return separator.join(str(item) for item in self.resolve(items))
            if key.startswith("Fn::"):
                raise NotImplementedError(f"intrinsic {key} in {node}")
        resolved = {key: self.resolve(value) for key, value in node.items()}
        return {key: value for key, value in resolved.items() if value is not NO_VALUE}

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.template.get("Parameters", {}):
            return self.parameter(name)
        return self.attribute(name, "Ref")

    def _sub(self, value: Any) -> str:
        text, variables = (value, {}) if isinstance(value, str) else value

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name:
                logical, attribute = name.split(".", 1)
                return self.attribute(logical, attribute)
            return str(self._ref(name))

        return re.sub(r"\$\{([^}!]+)\}", replace, text)

    # ------------------------------------------------------------------ the functions

    def functions(self) -> list[str]:
        return sorted(
            name
            for name, resource in self.resources.items()
            if resource["Type"] == "AWS::Lambda::Function"
        )

    def environment(self, function: str) -> dict[str, str]:
        """The function's variables as the deployment sets them (SAM merged the Globals)."""
        properties = self.resources[function]["Properties"]
        variables = properties.get("Environment", {}).get("Variables", {})
        return {name: str(value) for name, value in self.resolve(variables).items()}

    def handler(self, function: str) -> str:
        return str(self.resources[function]["Properties"]["Handler"])

    def role_of(self, function: str) -> str:
        role = self.resources[function]["Properties"]["Role"]
        assert "Fn::GetAtt" in role, f"{function}'s role is not one of the stack's: {role}"
        return str(role["Fn::GetAtt"][0])

    def statements(self, role: str) -> list[Statement]:
        """Every statement of the role's inline policies, resolved."""
        properties = self.resources[role]["Properties"]
        found = []
        for policy in properties.get("Policies", []) or []:
            document = self.resolve(policy["PolicyDocument"])
            for statement in document["Statement"]:
                found.append(Statement.of(statement, policy.get("PolicyName", "")))
        return found

    def managed_policies(self, role: str) -> list[str]:
        arns = self.resolve(self.resources[role]["Properties"].get("ManagedPolicyArns", []))
        return [str(arn) for arn in arns]


# ---------------------------------------------------------------------- policies


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _pattern(text: str, ignore_case: bool = False) -> re.Pattern[str]:
    """IAM's wildcards: `*` any run of characters (slashes too), `?` any one. Actions match
    in any case, resources (ARNs) only in theirs."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text)
    return re.compile("".join(parts), (re.IGNORECASE if ignore_case else 0) | re.DOTALL)


@dataclass(frozen=True)
class Statement:
    policy: str
    sid: str
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    has_condition: bool

    @classmethod
    def of(cls, raw: Mapping[str, Any], policy: str) -> Statement:
        assert "NotAction" not in raw and "NotResource" not in raw, raw
        return cls(
            policy=policy,
            sid=str(raw.get("Sid", "")),
            effect=str(raw["Effect"]),
            actions=tuple(_listed(raw["Action"])),
            resources=tuple(_listed(raw["Resource"])),
            has_condition="Condition" in raw,
        )

    def grants(self) -> Iterator[tuple[str, str]]:
        for action in self.actions:
            for resource in self.resources:
                yield action, resource


def allows(statements: Iterable[Statement], action: str, resource: str) -> bool:
    """Whether an Allow without conditions covers (action, resource), and no Deny does."""
    allowed = False
    for statement in statements:
        matches = any(_pattern(a, True).fullmatch(action) for a in statement.actions) and any(
            _pattern(r).fullmatch(resource) for r in statement.resources
        )
        if not matches:
            continue
        if statement.effect == "Deny":
            return False
        allowed = allowed or not statement.has_condition
    return allowed


def covers(granted_action: str, granted_resource: str, action: str, resource: str) -> bool:
    return bool(
        _pattern(granted_action, True).fullmatch(action)
        and _pattern(granted_resource).fullmatch(resource)
    )


# What the AWS managed policies SAM may attach grant (from their published documents).
MANAGED_POLICIES: dict[str, list[Statement]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": [
        Statement(
            "AWSLambdaBasicExecutionRole",
            "",
            "Allow",
            ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"),
            ("*",),
            False,
        )
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": [
        Statement(
            "AWSLambdaSQSQueueExecutionRole",
            "",
            "Allow",
            ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"),
            ("*",),
            False,
        ),
        Statement(
            "AWSLambdaSQSQueueExecutionRole",
            "",
            "Allow",
            ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"),
            ("*",),
            False,
        ),
    ],
}


# ---------------------------------------------------------------------- calls -> IAM


@dataclass(frozen=True)
class Need:
    """One IAM action on one resource that a recorded call needed."""

    action: str
    resource: str


def describe(service: str, operation: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """What of a call's parameters names resources: the recorder keeps only this (no data)."""
    kept: dict[str, Any] = {"service": service, "operation": operation}
    for name in ("TableName", "IndexName", "Bucket", "Key", "QueueUrl", "QueueName", "SecretId"):
        if name in params:
            kept[name] = params[name]
    if "Name" in params and service == "ssm":
        kept["Name"] = params["Name"]
    if "RequestItems" in params:
        kept["Tables"] = sorted(params["RequestItems"])
    if "TransactItems" in params:
        kept["TransactItems"] = [
            [kind, body["TableName"]]
            for item in params["TransactItems"]
            for kind, body in item.items()
        ]
    if "Delete" in params and "Objects" in params["Delete"]:
        kept["Keys"] = [o["Key"] for o in params["Delete"]["Objects"]]
    if "CopySource" in params:
        kept["CopySource"] = params["CopySource"]
    if "MetricDataQueries" in params:
        kept["Namespaces"] = sorted(
            {
                query["MetricStat"]["Metric"]["Namespace"]
                for query in params["MetricDataQueries"]
                if "MetricStat" in query
            }
        )
    return kept


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_DYNAMODB_ON_TABLE = {
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "DescribeTable",
}
_S3_OBJECT_ACTIONS = {
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "DeleteObject": "s3:DeleteObject",
}
_SQS_ACTIONS = {
    "SendMessage": "sqs:SendMessage",
    "SendMessageBatch": "sqs:SendMessage",
    "ReceiveMessage": "sqs:ReceiveMessage",
    "DeleteMessage": "sqs:DeleteMessage",
    "DeleteMessageBatch": "sqs:DeleteMessage",
    "ChangeMessageVisibility": "sqs:ChangeMessageVisibility",
    "GetQueueAttributes": "sqs:GetQueueAttributes",
}


class UnknownOperation(Exception):
    """A call this module cannot yet say the IAM action of: teach `needs` about it."""


def table_arn(table: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"


def queue_arn(url: str) -> str:
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:{REGION}:{account}:{name}"


def needs(call: Mapping[str, Any]) -> list[Need]:
    """The IAM actions on resources one recorded call needs (a transaction needs one per
    action inside it; DeleteObjects needs s3:DeleteObject on each key)."""
    service, operation = call["service"], call["operation"]
    if service == "dynamodb":
        if operation in _DYNAMODB_ON_TABLE:
            arn = table_arn(call["TableName"])
            if "IndexName" in call:
                arn += f"/index/{call['IndexName']}"
            return [Need(f"dynamodb:{operation}", arn)]
        if operation in {"BatchGetItem", "BatchWriteItem"}:
            return [Need(f"dynamodb:{operation}", table_arn(t)) for t in call["Tables"]]
        if operation in {"TransactWriteItems", "TransactGetItems"}:
            return [
                Need(f"dynamodb:{_TRANSACT_ACTIONS[kind]}", table_arn(table))
                for kind, table in call["TransactItems"]
            ]
    if service == "s3":
        bucket = f"arn:aws:s3:::{call['Bucket']}"
        if operation in _S3_OBJECT_ACTIONS:
            return [Need(_S3_OBJECT_ACTIONS[operation], f"{bucket}/{call['Key']}")]
        if operation == "DeleteObjects":
            return [Need("s3:DeleteObject", f"{bucket}/{key}") for key in call["Keys"]]
        if operation in {"ListObjectsV2", "ListObjects", "HeadBucket"}:
            return [Need("s3:ListBucket", bucket)]
        if operation in {"CopyObject", "UploadPartCopy"}:
            source = str(call["CopySource"]).lstrip("/").split("?")[0]
            return [
                Need("s3:GetObject", f"arn:aws:s3:::{source}"),
                Need("s3:PutObject", f"{bucket}/{call['Key']}"),
            ]
    if service == "sqs" and operation in _SQS_ACTIONS:
        return [Need(_SQS_ACTIONS[operation], queue_arn(call["QueueUrl"]))]
    if service == "secretsmanager" and operation == "GetSecretValue":
        secret = str(call["SecretId"])
        assert secret.startswith("arn:"), f"a secret named, not by its ARN: {secret}"
        return [Need("secretsmanager:GetSecretValue", secret)]
    if service == "cloudwatch" and operation in {"GetMetricData", "PutMetricData"}:
        # No resource-level permission: IAM authorizes them on "*" whatever metrics they name.
        # (The functions write theirs as EMF lines in their logs, never with PutMetricData.)
        return [Need(f"cloudwatch:{operation}", "*")]
    if service == "ssm" and operation in {"GetParameter", "GetParameters"}:
        name = str(call["Name"]).lstrip("/")
        return [Need(f"ssm:{operation}", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{name}")]
    raise UnknownOperation(f"{service}.{operation}")
