"""`benchmarks/http_compare.py` in quick mode, against each server: every scenario runs end to
end and its data checks pass (the timings are not checked). And the checks themselves catch a
lost, repeated or reordered message."""

from __future__ import annotations

import shutil

import pytest

from benchmarks.http_compare import (
    Failed,
    check_bytes,
    check_interleaved,
    main,
    message,
    messages,
)

pytestmark = pytest.mark.integration

# Append latency p50/p99 through httpx and through http.client (4), concurrent shared and
# separate (2), producer batched and not (2), live p50/p99 (2), bulk append and catch-up in
# 64 KiB appends (2) and in 1 KiB appends (2), appends over time p50/p99/max (3), fan-out
# p50/p99 (2).
ROWS = 21
COLUMN = {"reference": 3, "ours": 4}  # the server's column in the printed table


def run_quick(server: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The benchmark's figures for `server`, one per table row."""
    status = main(["--quick", "--only", server])
    out = capsys.readouterr().out
    assert "WRONG" not in out, out
    assert status == 0, out
    rows = [line.strip("| ").split(" | ") for line in out.splitlines() if line.startswith("| ")]
    return [row[COLUMN[server]] for row in rows if row[0] not in ("scenario", "---")]


def test_every_scenario_checks_its_data_against_dsaws_serve(
    capsys: pytest.CaptureFixture[str],
) -> None:
    figures = run_quick("ours", capsys)
    assert len(figures) == ROWS and "-" not in figures


def test_every_scenario_checks_its_data_against_the_reference_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("the reference server needs Node 20 (node and npm)")
    figures = run_quick("reference", capsys)
    assert len(figures) == ROWS and "-" not in figures


def test_the_byte_check_catches_a_lost_a_repeated_and_a_reordered_message() -> None:
    sent = [message("a", i, 40) for i in range(3)]
    check_bytes("s", b"".join(sent), b"".join(sent))
    for wrong in (sent[:2], [*sent, sent[2]], [sent[1], sent[0], sent[2]]):
        with pytest.raises(Failed):
            check_bytes("s", b"".join(wrong), b"".join(sent))


def test_the_interleaving_check_allows_any_interleaving_but_not_a_reordering() -> None:
    a, b = messages("a", 2, 40), messages("b", 2, 40)
    interleaved = a[:40] + b[:40] + a[40:] + b[40:]
    check_interleaved("s", interleaved, ["a", "b"], 2, 40)
    swapped = a[40:] + a[:40] + b
    repeated = a + b[:40] + b[:40]
    for wrong in (swapped, repeated):
        with pytest.raises(Failed):
            check_interleaved("s", wrong, ["a", "b"], 2, 40)
