"""The role checker's own rules (`iam_roles`): which IAM action a call needs, how a policy's
wildcards match, and how the template's intrinsic functions resolve."""

from __future__ import annotations

import pytest
from iam_roles import NO_VALUE, Need, Stack, Statement, UnknownOperation, allows, describe, needs

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/t"


def _needs(service: str, operation: str, **params: object) -> list[Need]:
    return needs(describe(service, operation, params))


def test_each_action_inside_a_transaction_needs_its_own_grant() -> None:
    items = [
        {"Put": {"TableName": "t"}},
        {"Update": {"TableName": "t"}},
        {"Delete": {"TableName": "t"}},
        {"ConditionCheck": {"TableName": "t"}},
    ]
    assert _needs("dynamodb", "TransactWriteItems", TransactItems=items) == [
        Need("dynamodb:PutItem", TABLE),
        Need("dynamodb:UpdateItem", TABLE),
        Need("dynamodb:DeleteItem", TABLE),
        Need("dynamodb:ConditionCheckItem", TABLE),
    ]
    assert _needs("dynamodb", "BatchWriteItem", RequestItems={"t": []}) == [
        Need("dynamodb:BatchWriteItem", TABLE)
    ]
    assert _needs("dynamodb", "Query", TableName="t", IndexName="i") == [
        Need("dynamodb:Query", TABLE + "/index/i")
    ]


def test_s3_sqs_and_secrets_calls_name_their_resources() -> None:
    objects = {"Objects": [{"Key": "data/a"}, {"Key": "data/b"}]}
    assert _needs("s3", "DeleteObjects", Bucket="b", Delete=objects) == [
        Need("s3:DeleteObject", "arn:aws:s3:::b/data/a"),
        Need("s3:DeleteObject", "arn:aws:s3:::b/data/b"),
    ]
    assert _needs("s3", "ListObjectsV2", Bucket="b", Prefix="data/") == [
        Need("s3:ListBucket", "arn:aws:s3:::b")
    ]
    assert _needs("s3", "HeadObject", Bucket="b", Key="k") == [
        Need("s3:GetObject", "arn:aws:s3:::b/k")
    ]
    queue = "http://127.0.0.1:5000/123456789012/tasks"
    assert _needs("sqs", "SendMessage", QueueUrl=queue, MessageBody="x") == [
        Need("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:tasks")
    ]
    secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys-AbCdEf"
    assert _needs("secretsmanager", "GetSecretValue", SecretId=secret) == [
        Need("secretsmanager:GetSecretValue", secret)
    ]
    with pytest.raises(UnknownOperation):
        _needs("dynamodb", "CreateTable", TableName="t")


def test_metric_reads_need_their_action_on_every_resource_and_name_their_namespaces() -> None:
    query = {
        "Id": "a",
        "MetricStat": {"Metric": {"Namespace": "N", "MetricName": "M"}, "Period": 60},
    }
    params = {"MetricDataQueries": [query, {"Id": "e", "Expression": "a * 2"}]}
    call = describe("cloudwatch", "GetMetricData", params)
    assert call["Namespaces"] == ["N"]
    assert needs(call) == [Need("cloudwatch:GetMetricData", "*")]


def _statement(
    action: str, resource: str, effect: str = "Allow", condition: bool = False
) -> Statement:
    return Statement("p", "", effect, (action,), (resource,), condition)


def test_wildcards_deny_and_conditions() -> None:
    data = _statement("s3:GetObject", "arn:aws:s3:::b/data/*")
    assert allows([data], "s3:GetObject", "arn:aws:s3:::b/data/inc/key")
    assert allows([data], "S3:getobject", "arn:aws:s3:::b/data/inc/key")  # actions: any case
    assert not allows([data], "s3:GetObject", "arn:aws:s3:::b/exports/x")
    assert not allows([data], "s3:PutObject", "arn:aws:s3:::b/data/x")
    assert not allows([data], "s3:GetObject", "arn:aws:s3:::bb/data/x")
    deny = _statement("s3:*", "*", effect="Deny")
    assert not allows([data, deny], "s3:GetObject", "arn:aws:s3:::b/data/x")
    # Only an Allow that holds whatever the request carries counts.
    conditional = _statement("dynamodb:Query", TABLE, condition=True)
    assert not allows([conditional], "dynamodb:Query", TABLE)
    assert allows([_statement("dynamodb:?uery", TABLE)], "dynamodb:Query", TABLE)


def test_intrinsic_functions_resolve_as_cloudformation_would() -> None:
    template = {
        "Parameters": {"On": {"Default": "yes"}, "Name": {"Default": "n"}},
        "Conditions": {"IsOn": {"Fn::Equals": [{"Ref": "On"}, "yes"]}},
        "Resources": {
            "Table": {"Type": "AWS::DynamoDB::Table"},
            "Bucket": {"Type": "AWS::S3::Bucket"},
        },
    }
    stack = Stack(template, {"Name": "given"}, {"Bucket": {"Arn": "arn:aws:s3:::b"}})
    assert stack.resolve({"Fn::Sub": "${Bucket.Arn}/data/*"}) == "arn:aws:s3:::b/data/*"
    assert stack.resolve({"Fn::Sub": "${AWS::Region}-${Name}"}) == "us-east-1-given"
    assert stack.resolve({"Fn::If": ["IsOn", "a", "b"]}) == "a"
    assert stack.resolve({"Fn::GetAtt": ["Table", "Arn"]}).startswith("arn:aws:dynamodb:")
    assert stack.resolve({"Ref": "AWS::NoValue"}) is NO_VALUE
    assert stack.resolve({"A": {"Ref": "AWS::NoValue"}, "B": 1}) == {"B": 1}
    assert stack.resolve({"Fn::Join": ["/", ["a", {"Ref": "Name"}]]}) == "a/given"
