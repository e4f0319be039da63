"""On a moto version the patches were not tested with, the emulator warns and runs moto as it
is: everything still works, through moto's own code."""

from __future__ import annotations

from typing import Any

import pytest
from emulator_support import in_process_dynamodb, patches_restored

from durable_streams_aws.core.storage.bootstrap import ensure_table
from durable_streams_aws.infra.moto_patches import PATCHES, UntestedMotoVersion, _registry


def test_the_emulator_runs_moto_unpatched_on_an_untested_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with patches_restored():
        for patch in PATCHES:
            patch.uninstall()
        moto_s = {patch: patch.bound() for patch in PATCHES}
        monkeypatch.setattr(_registry, "installed_moto_version", lambda: "9.0.0")
        monkeypatch.setattr(_registry, "_warned", False)
        with pytest.warns(UntestedMotoVersion):
            dynamodb = in_process_dynamodb()
        assert {patch: patch.bound() for patch in PATCHES} == moto_s
        assert _round_trip(dynamodb) == {"pk": {"S": "a"}, "sk": {"S": "b"}, "n": {"N": "2"}}


def _round_trip(dynamodb: Any) -> dict[str, Any]:
    ensure_table(dynamodb, "untested")
    key = {"pk": {"S": "a"}, "sk": {"S": "b"}}
    dynamodb.transact_write_items(
        TransactItems=[{"Put": {"TableName": "untested", "Item": {**key, "n": {"N": "1"}}}}]
    )
    dynamodb.update_item(
        TableName="untested",
        Key=key,
        UpdateExpression="SET #n = :two",
        ConditionExpression="attribute_exists(pk)",
        ExpressionAttributeNames={"#n": "n"},
        ExpressionAttributeValues={":two": {"N": "2"}},
    )
    (item,) = dynamodb.query(
        TableName="untested",
        KeyConditionExpression="pk = :a",
        ExpressionAttributeValues={":a": {"S": "a"}},
    )["Items"]
    dynamodb.delete_table(TableName="untested")
    return item
