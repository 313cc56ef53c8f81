"""The benchmarks still run: tiny sizes, no assertions on timing, only on the report's shape."""

from __future__ import annotations

from typing import Any

from bench import memory, overhead, timeouts, wrapper


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
        assert cell["peer_ratio"][overhead.PEER] == 1.0
        assert isinstance(cell["target_met"], bool) and isinstance(cell["peer_target_met"], bool)
    assert "resilient_node" in overhead.table(result)


def test_wrapper_quick() -> None:
    """The wrapper against the bare tool, called directly (no ToolNode around it)."""
    result = wrapper.run(rounds=1, target_s=0.001)
    assert [c["mode"] for c in result["cells"]] == ["sync", "async"]
    for cell in result["cells"]:
        assert set(cell["ratio"]) == {"tool", "tool+timeout", "wrapped", "wrapped_no_timeout"}
        assert cell["ratio"]["tool"] == 1.0 and cell["added_us"]["tool"] == 0
        assert cell["peer_ratio"]["tool+timeout"] == 1.0
        assert isinstance(cell["target_met"], bool) and isinstance(cell["peer_target_met"], bool)
    assert "wrapped_no_timeout" in wrapper.table(result)


def test_timeouts_and_memory_tiny() -> None:
    late = timeouts.run(samples=2, timeout=0.05)
    assert set(late["late_ms"]) == {"sync", "async"}
    assert set(late["late_ms"]["sync"]) == {"p50", "p95", "max", "n"}
    assert late["error_types"] == ["unknown_outcome"]

    mem = memory.run(calls=40, checkpoints=2)
    assert set(mem["retained_bytes_at"]) == {20, 40}
    assert {"peak_bytes_above_base", "bounded", "probes"} <= set(mem)


def test_instruction_counts_are_read_from_callgrind_dumps(tmp_path: Any) -> None:
    from bench import instructions

    (tmp_path / "cg.out.1").write_text("events: Ir\nsummary: 1200\n")  # an import's reduce
    (tmp_path / "cg.out.2").write_text("events: Ir\nsummary: 5000000\n")
    (tmp_path / "cg.out.10").write_text("events: Ir\nsummary: 7000000\n")
    (tmp_path / "cg.out").write_text("events: Ir\nsummary: 0\n")  # the final dump
    assert instructions._totals(tmp_path) == [5_000_000, 7_000_000]


def test_saved_results_load_back(tmp_path: Any) -> None:
    from bench import _util

    path = tmp_path / "latest.json"
    assert _util.load_json(path) == {}
    _util.save_json({"meta": {"command": "x"}, "overhead": {"cells": []}}, path)
    assert _util.load_json(path)["overhead"] == {"cells": []}
    path.write_text("not json")
    assert _util.load_json(path) == {}


def test_the_instruction_floor_variant_answers_through_the_attempt_stage_alone() -> None:
    import asyncio

    from bench import instructions

    node = instructions.attempt_only(overhead.make_tool())
    assert [s.name for s in node.pipeline.stages] == ["attempt"]
    for state in overhead.make_inputs(1, 3):
        out = node.invoke(state, overhead._DIRECT_CONFIG)
        assert all(m.content.startswith("value ") for m in out["messages"])
        assert [m.status for m in out["messages"]] == ["success"] * 3
        out = asyncio.run(node.ainvoke(state, overhead._DIRECT_CONFIG))
        assert [m.status for m in out["messages"]] == ["success"] * 3
    cell = {
        "mode": "async",
        "calls_per_message": 1,
        "instructions_per_call": {"toolnode": 1000, "resilient_node": 1200},
        "ratio": {"toolnode": 1.0, "resilient_node": 1.2, instructions.FLOOR: 1.1},
        "target_resilient_node": 1.15,
    }
    text = instructions.table({"cells": [cell]})
    assert "attempt_only ratio" in text and "1.1" in text


def test_checkpoint_bytes_tiny() -> None:
    """The checkpoint benchmark's report: three variants, ratios to ToolNode, reuse."""
    from bench import bench_checkpoints

    result = bench_checkpoints.run(steps=3)
    assert set(result["variants"]) == set(bench_checkpoints.VARIANTS)
    assert result["variants"]["toolnode"]["ratio"] == 1.0
    assert isinstance(result["target_met"], bool)
    assert result["reused_after_restart"] is True
    assert "ResilientToolsState" in bench_checkpoints.table(result)
