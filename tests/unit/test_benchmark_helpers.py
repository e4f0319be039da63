"""The benchmarks' shared summaries and tables (benchmarks/_stats.py, benchmarks/_report.py)
and how they tell a server's arguments name its storage (benchmarks/_processes.py)."""

from __future__ import annotations

import math

import pytest

from benchmarks._processes import names_storage, python_module
from benchmarks._report import per_operation, print_table, table_header, table_row
from benchmarks._stats import Timed, percentile, percentile_ms


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1 .. 100
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile(values, 0.0) == 1
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2  # sorted first
    assert percentile([7.0], 0.99) == 7


def test_percentile_of_nothing_is_nan() -> None:
    assert math.isnan(percentile([], 0.5))
    assert math.isnan(percentile_ms(iter([]), 0.5))


def test_percentile_ms_converts_seconds() -> None:
    assert percentile_ms([0.001, 0.002, 0.003], 0.5) == pytest.approx(2.0)


def test_timed_measures_wall_and_cpu_time() -> None:
    with Timed() as timed:
        sum(range(100_000))
    assert timed.seconds > 0
    assert timed.client_cpu >= 0


def test_a_table_is_markdown_with_its_alignment(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(("name", "count"), "<>", iter([["a", 1], ["b", "2.50"]]))
    assert capsys.readouterr().out.splitlines() == [
        "| name | count |",
        "| --- | ---: |",
        "| a | 1 |",
        "| b | 2.50 |",
    ]


def test_an_empty_cell_keeps_its_column() -> None:
    assert table_row(["", "x", ""]) == "|  | x |  |"


def test_a_table_refuses_a_row_or_an_alignment_that_does_not_fit() -> None:
    with pytest.raises(ValueError):
        table_header(("a", "b"), "<")
    with pytest.raises(ValueError):
        table_header(("a",), "^")
    with pytest.raises(ValueError):
        print_table(("a", "b"), "<<", [["only one"]])


def test_per_operation_divides_and_sorts_by_name() -> None:
    calls = {"PutItem": 3, "GetItem": 1}
    assert per_operation(calls, 2, ".2f") == "GetItem 0.50, PutItem 1.50"
    assert per_operation({}, 1, ".1f") == ""


def test_storage_flags_are_recognised() -> None:
    assert not names_storage(["--port", "1"])
    assert names_storage(["--in-memory"])
    assert names_storage(("--data-dir", "/tmp/x"))
    assert names_storage(["--aws"])


def test_python_module_runs_in_this_interpreter() -> None:
    command = python_module(["pkg.cli", "serve"], 8080, "--x")
    assert command[1:] == ["-m", "pkg.cli", "serve", "--port", "8080", "--x"]
