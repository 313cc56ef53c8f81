"""The benchmarks still run: tiny sizes, no assertions on timing, only on the report's shape."""

from __future__ import annotations

from bench import memory, overhead, timeouts


def test_overhead_quick_one_round_one_call() -> None:
    result = overhead.run(rounds=1, calls=(1,), target_s=0.001)
    cells = result["cells"]
    assert [(c["mode"], c["context"]) for c in cells] == [
        ("sync", "direct"),
        ("sync", "graph"),
        ("async", "direct"),
        ("async", "graph"),
    ]
    for cell in cells:
        assert cell["calls_per_message"] == 1
        for key in ("us_per_call", "ratio", "cpu_ratio", "round_ratio_range"):
            assert set(cell[key]) == set(overhead.VARIANTS)
        assert cell["ratio"][overhead.BASELINE] == 1.0
        assert isinstance(cell["target_met"], bool)
    assert "resilient_node" in overhead.table(result)


def test_timeouts_and_memory_tiny() -> None:
    late = timeouts.run(samples=2, timeout=0.05)
    assert set(late["late_ms"]) == {"sync", "async"}
    assert set(late["late_ms"]["sync"]) == {"p50", "p95", "max", "n"}
    assert late["error_types"] == ["unknown_outcome"]

    mem = memory.run(calls=40, checkpoints=2)
    assert set(mem["retained_bytes_at"]) == {20, 40}
    assert {"peak_bytes_above_base", "bounded", "probes"} <= set(mem)
