"""The benchmarks' DynamoDB Local mode runs: `benchmarks.hot_stream --dynamodb-local` in a
small run (its writers' calls counted by the emulator's process and passed on to DynamoDB
Local), every acknowledged record read back once."""

from __future__ import annotations

from benchmarks import hot_stream
from benchmarks._processes import counted_emulator
from durable_streams_aws.core.runtime import use_emulator_credentials


def test_hot_stream_runs_on_dynamodb_local(dynamodb_local_installed: None) -> None:
    use_emulator_credentials()
    with counted_emulator((1.0, 2.0), dynamodb_local=True) as endpoint:
        result = hot_stream.run(endpoint, "producer", 2, 1.5, 100)
    assert result.problems == []
    assert result.acknowledged and result.refused() == {}
    # Counted on their way to DynamoDB Local: a transaction per append at least.
    assert result.calls["TransactWriteItems"] >= len(result.acknowledged)
