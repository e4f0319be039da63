"""The storage-cost benchmark, run small so it cannot rot: its figures are checked, not only
printed."""

from __future__ import annotations

from benchmarks.storage_cost import MB, measure


def test_the_storage_cost_benchmark_measures_a_sealed_stream() -> None:
    m = measure(3 * MB, per_append=100, close=True)
    assert m.messages == 30_000
    assert m.before.item_bytes > m.stream_bytes  # every byte inline, with per-item overhead
    assert m.before.objects == 0
    # A closed stream is sealed whole: DynamoDB keeps its metadata, a segment item and a mark.
    assert m.after.item_bytes < 0.01 * m.stream_bytes and m.after.items <= 4
    assert m.after.object_bytes > m.stream_bytes
    # One ranged GET per response, and the segments are learnt with one Query.
    after = m.read_after
    assert after.calls["GetObject"] == after.responses == after.calls["GetItem"]
    assert after.calls.get("Query", 0) == 1
    assert m.after.monthly_cost < m.before.monthly_cost / 5
