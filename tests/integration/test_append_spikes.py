"""`benchmarks/append_spikes.py`: in quick mode against `dsaws serve` it runs end to end, its
read-back checks pass and the server's trace is read (the timings are not checked); and a
slow append is put down to what it overlapped."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.append_spikes import Trace, main

pytestmark = pytest.mark.integration


def test_quick_mode_measures_both_sizes_and_reads_the_server_s_trace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["--quick", "--seconds", "1", "--burst", "0.5", "--pause", "0.2"])
    out = capsys.readouterr().out
    assert status == 0 and "WRONG" not in out, out
    rows = [line for line in out.splitlines() if line.startswith("| 100 B | ")]
    assert rows and "p99 <= 3x p50" in rows[0]
    assert "| 1,024 B | " in out
    assert "collections: generation 0" in out  # the trace was written and read
    assert "no trace" not in out


def _request(start: float, end: float, cpu: float) -> dict[str, Any]:
    return {"kind": "request", "method": "POST", "start": start, "end": end, "cpu": cpu}


def test_a_slow_append_is_put_down_to_what_it_overlapped() -> None:
    median = 0.001
    trace = Trace(
        [
            {"kind": "gc", "generation": 2, "start": 10.0, "seconds": 0.05, "thread": "T"},
            {"kind": "gc", "generation": 0, "start": 20.001, "seconds": 0.0005, "thread": "T"},
            {
                "kind": "sweep",
                "name": "sealing",
                "due": 19,
                "start": 20,
                "swept": 21,
                "end": 21,
                "thread_cpu": 0.5,
                "report": {},
            },
            {
                "kind": "lock",
                "thread": "sealing",
                "action": "compaction: take the state",
                "requested": 30.0,
                "acquired": 30.0,
                "released": 30.04,
                "journal_seconds": 0,
            },
            {
                "kind": "lock",
                "thread": "MainThread",
                "action": "TransactWriteItems",
                "requested": 40.0,
                "acquired": 40.0,
                "released": 40.004,
                "journal_seconds": 0.003,
            },
            _request(50.0, 50.01, 0.009),
            _request(60.0, 60.01, 0.001),
            _request(70.0, 70.0012, 0.001),
        ]
    )
    assert trace.cause(9.99, 10.06, median) == "gc generation 2"
    # A short collection inside a slow append does not explain it; the sweep running does.
    assert trace.cause(20.0, 20.01, median) == "sealer"
    assert trace.cause(29.99, 30.05, median) == "journal compaction"
    assert trace.cause(39.999, 40.005, median) == "journal write"
    assert trace.cause(49.999, 50.011, median) == "server, other"
    assert trace.cause(59.999, 60.011, median) == "server, descheduled"
    assert trace.cause(69.999, 70.01, median) == "outside the server"
