"""The benchmarks' DynamoDB Local mode runs: `benchmarks.hot_stream --dynamodb-local` in a
small run (its writers' calls counted by the emulator's process and passed on to DynamoDB
Local), every acknowledged record read back once; `benchmarks.aws_calls --dynamodb-local
--quick`, every budget met on DynamoDB's own paging."""

from __future__ import annotations

import asyncio

from benchmarks import aws_calls, hot_stream
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


def test_aws_calls_budgets_hold_on_dynamodb_local(dynamodb_local_installed: None) -> None:
    rows = asyncio.run(aws_calls.run(dynamodb_local=True, sizes=aws_calls.QUICK))
    over = [(row.operation, row.calls_per_op, row.budget) for row in rows if not row.ok]
    assert over == []
    by_name = {row.operation: row for row in rows}
    # DynamoDB's 1 MB pages: the 4 MiB of chunks in 5 Queries and the metadata (1.25 + 0.25 per
    # MiB) for a new instance, and sealed history in one response (0.75), as on the emulator.
    history = "per MiB of 4 MiB in 4 KiB appends"
    assert by_name[f"{history}, new instance"].calls_per_op == 1.5
    assert by_name[f"{history}, sealed, new instance"].calls_per_op == 0.75
