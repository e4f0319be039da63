"""The template's alarms and dashboard: each watches a metric that exists (the server's own
metrics by the names the code emits), the alarms go with the `Alarms` parameter, and every
queue a failed message lands in is watched."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_template import load_template

from durable_streams_aws.core.telemetry import Metric

OWN_NAMESPACE = "DurableStreams"
SERVICE_DIMENSION = ["service", "durable-streams"]  # functions/api.py's Powertools service
# The AWS metrics the template watches, by namespace (each in AWS's documentation).
AWS_METRICS = {
    "AWS/Lambda": {
        "Url5xxCount",
        "Url4xxCount",
        "UrlRequestCount",
        "UrlRequestLatency",
        "Errors",
        "Throttles",
        "ConcurrentExecutions",
        "Invocations",
        "Duration",
    },
    "AWS/CloudFront": {"5xxErrorRate", "Requests", "BytesDownloaded", "CacheHitRate"},
    "AWS/DynamoDB": {
        "ReadThrottleEvents",
        "WriteThrottleEvents",
        "SystemErrors",
        "ConsumedReadCapacityUnits",
        "ConsumedWriteCapacityUnits",
    },
    "AWS/SQS": {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage"},
    OWN_NAMESPACE: {metric.value for metric in Metric},
}


def resources_of_type(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def alarm_metrics(alarm: dict[str, Any]) -> list[tuple[str, str]]:
    """(namespace, metric name) of everything an alarm watches, math inputs included."""
    properties = alarm["Properties"]
    if "MetricName" in properties:
        return [(properties["Namespace"], properties["MetricName"])]
    watched = []
    for query in properties["Metrics"]:
        if "MetricStat" in query:
            metric = query["MetricStat"]["Metric"]
            watched.append((metric["Namespace"], metric["MetricName"]))
        else:
            expression = query["Expression"]
            text = expression["!Sub"] if isinstance(expression, dict) else expression
            ids = {q["Id"] for q in properties["Metrics"] if "MetricStat" in q}
            used = set(re.findall(r"[a-z][a-z0-9_]*", text))
            assert used & ids == ids, f"{query['Id']} leaves out some of {ids}"
    return watched


def evaluate(condition: Any, conditions: dict[str, Any], parameters: dict[str, str]) -> bool:
    """A template condition under the given parameter values (the forms the template uses)."""
    ((function, argument),) = condition.items()
    if function == "!Condition":
        return evaluate(conditions[argument], conditions, parameters)
    if function == "!Equals":
        left, right = (_value(v, parameters) for v in argument)
        return left == right
    if function == "!And":
        return all(evaluate(c, conditions, parameters) for c in argument)
    if function == "!Not":
        return not evaluate(argument[0], conditions, parameters)
    raise AssertionError(f"unexpected condition form {condition!r}")


def _value(node: Any, parameters: dict[str, str]) -> str:
    if isinstance(node, dict) and "!Ref" in node:
        return parameters[node["!Ref"]]
    return str(node)


def parameters_with(template: dict[str, Any], **overrides: str) -> dict[str, str]:
    values = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()}
    values["AWS::Region"] = "us-east-1"
    return {**values, **overrides}


def created(template: dict[str, Any], parameters: dict[str, str]) -> set[str]:
    conditions = template["Conditions"]
    return {
        name
        for name, resource in template["Resources"].items()
        if "Condition" not in resource
        or evaluate({"!Condition": resource["Condition"]}, conditions, parameters)
    }


def test_every_alarm_watches_a_metric_that_is_published() -> None:
    alarms = resources_of_type(load_template(), "AWS::CloudWatch::Alarm")
    assert len(alarms) >= 9
    for name, alarm in alarms.items():
        watched = alarm_metrics(alarm)
        assert watched, name
        for namespace, metric in watched:
            assert metric in AWS_METRICS[namespace], f"{name} watches {namespace} {metric}"
        properties = alarm["Properties"]
        assert properties["AlarmActions"] == [{"!Ref": "AlarmTopic"}], name
        assert properties["TreatMissingData"] == "notBreaching", name
        assert len(properties["AlarmDescription"]) > 40, name


def test_the_alarms_parameter_turns_every_alarm_and_the_topic_off() -> None:
    template = load_template()
    alarms = set(resources_of_type(template, "AWS::CloudWatch::Alarm"))
    topic_parts = {"AlarmTopic", "AlarmEmailSubscription"}
    on = created(template, parameters_with(template, AlarmEmail="ops@example.com"))
    assert alarms | topic_parts <= on
    off = created(template, parameters_with(template, Alarms="off", AlarmEmail="ops@x.com"))
    assert not (alarms | topic_parts) & off
    assert "Dashboard" in off  # the dashboard costs nothing per alarm and stays
    no_email = created(template, parameters_with(template))
    assert "AlarmEmailSubscription" not in no_email and "AlarmTopic" in no_email
    # CloudFront's metrics exist in us-east-1 only: elsewhere its alarm would never fire.
    elsewhere = created(template, parameters_with(template, **{"AWS::Region": "eu-west-1"}))
    assert "CdnErrorRateAlarm" not in elsewhere and "ApiErrorRateAlarm" in elsewhere


def test_every_dead_letter_queue_is_watched_and_scheduled_runs_have_one() -> None:
    template = load_template()
    watched = {
        dimension["Value"]["!GetAtt"].split(".")[0]
        for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values()
        for dimension in alarm["Properties"].get("Dimensions", [])
        if dimension["Name"] == "QueueName"
    }
    dead_letter_queues = {
        resource["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["!GetAtt"].split(".")[0]
        for resource in resources_of_type(template, "AWS::SQS::Queue").values()
        if "RedrivePolicy" in resource["Properties"]
    }
    for name, function in resources_of_type(template, "AWS::Serverless::Function").items():
        events = function["Properties"].get("Events", {}).values()
        if any(event["Type"] == "Schedule" for event in events):
            target = function["Properties"]["DeadLetterQueue"]["TargetArn"]["!GetAtt"]
            dead_letter_queues.add(target.split(".")[0])
        else:
            assert "DeadLetterQueue" not in function["Properties"], name
    assert dead_letter_queues == {"SubscriptionTaskFailures", "ScheduledRunFailures"}
    assert dead_letter_queues <= watched


def test_the_dashboard_is_json_and_shows_what_the_server_emits() -> None:
    template = load_template()
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["!Sub"]
    names = set(template["Resources"]) | {"AWS::Region"}
    for reference in re.findall(r"\$\{([^}]+)\}", body):
        assert reference.split(".")[0] in names, reference
    document = json.loads(re.sub(r"\$\{[^}]+\}", "x", body))
    shown: set[tuple[str, str]] = set()
    for widget in document["widgets"]:
        previous: list[Any] = []
        for row in widget["properties"]["metrics"]:
            if isinstance(row[0], dict):  # a SEARCH over a metric's dimension values
                searched = re.search(r'\{(\w+),([\w,]+)\} MetricName="(\w+)"', row[0]["expression"])
                assert searched, row
                namespace, keys, metric = searched.groups()
                assert metric in AWS_METRICS[namespace], row
                assert keys.split(",")[0] == SERVICE_DIMENSION[0], row
                shown.add((namespace, metric))
                continue
            row = _expand(row, previous)
            previous = row
            namespace, metric = row[0], row[1]
            assert metric in AWS_METRICS[namespace], (widget["properties"]["title"], metric)
            if namespace == OWN_NAMESPACE:
                assert [v for v in row[2:4]] == SERVICE_DIMENSION, row
            shown.add((namespace, metric))
    emitted = {(OWN_NAMESPACE, metric.value) for metric in Metric}
    assert emitted <= shown, emitted - shown


def _expand(row: list[Any], previous: list[Any]) -> list[Any]:
    """CloudWatch's shorthand: "." repeats the previous row's value, "..." all its dimensions."""
    if row and row[0] == "...":
        return [*previous[: len(previous) - (1 if isinstance(previous[-1], dict) else 0)], *row[1:]]
    return [previous[i] if value == "." else value for i, value in enumerate(row)]


@pytest.mark.parametrize(
    "parameter",
    [
        "AlarmErrorRatePercent",
        "AlarmConcurrentExecutions",
        "AlarmDynamoDbThrottles",
        "AlarmSealerLagSeconds",
        "AlarmWebhookFailures",
    ],
)
def test_thresholds_are_parameters_with_defaults(parameter: str) -> None:
    template = load_template()
    assert "Default" in template["Parameters"][parameter]
    text = json.dumps(template["Resources"])
    assert f'{{"!Ref": "{parameter}"}}' in text or f"${{{parameter}}}" in text


def test_every_metric_is_explained_in_the_operating_page() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operating.md").read_text()
    table = page.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)`", table))
    missing = {metric.value for metric in Metric} - named
    assert not missing, f"not in docs/operating.md's metrics table: {sorted(missing)}"
