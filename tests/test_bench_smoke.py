"""The benchmarks still run: tiny sizes, no assertions on timing, only on the report's shape."""

from __future__ import annotations

import time
from typing import Any

import pytest

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
        "ratio": {
            "toolnode": 1.0, "resilient_node": 1.2, instructions.FLOOR: 1.1,
            instructions.ADAPTER_FLOOR: 1.05,
        },
        "target_resilient_node": 1.15,
    }  # fmt: skip
    text = instructions.table({"cells": [cell]})
    assert "attempt_only ratio" in text and "1.1" in text
    assert "adapter_only ratio" in text and "1.05" in text


def test_the_adapter_floor_has_no_stage_and_answers_as_toolnode_does() -> None:
    """`adapter_only` (async cells only) keeps no stage, not even the attempt's deadline,
    which is what makes it a lower bound; its answers are ToolNode's."""
    import asyncio

    from bench import instructions

    loop = asyncio.new_event_loop()
    try:
        for calls in (1, 3):
            floors = instructions._floors("async", overhead.make_tool())
            assert set(floors) == {instructions.FLOOR, instructions.ADAPTER_FLOOR}
            assert floors[instructions.ADAPTER_FLOOR].pipeline.stages == []
            nodes = {"toolnode": overhead.make_nodes(overhead.make_tool())["toolnode"], **floors}
            overhead.check_answers(nodes, "async", calls, loop)
            assert set(instructions._prepares("async", calls, loop, True)) == {
                *instructions.VARIANTS, instructions.FLOOR, instructions.ADAPTER_FLOOR,
            }  # fmt: skip
        assert set(instructions._floors("sync", overhead.make_tool())) == {instructions.FLOOR}
    finally:
        loop.close()


def test_the_breakdown_shows_each_async_cell_with_its_lower_bounds() -> None:
    from bench import report

    counts = {"toolnode": 1000, "toolnode+timeout": 1050, "adapter_only": 1100,
              "attempt_only": 1130, "resilient_node": 1160}  # fmt: skip
    cell = {
        "mode": "async",
        "calls_per_message": 10,
        "instructions_per_call": counts,
        "ratio": {k: v / 1000 for k, v in counts.items()},
    }
    sync = {**cell, "mode": "sync"}
    text = report._breakdown({"cells": [cell, sync]})
    assert text.count("| 10 |") == 5  # the async cell only
    assert "| 10 | `adapter_only` | 1,100 | 1.100x |" in text
    assert "| 10 | `ResilientToolNode` | 1,160 | 1.160x |" in text
    unbounded = {**cell, "instructions_per_call": {"toolnode": 1000, "resilient_node": 1160}}
    assert report._breakdown({"cells": [unbounded]}).startswith(report.NOT_MEASURED)


def test_checkpoint_bytes_tiny() -> None:
    """The checkpoint benchmark's report: three variants, ratios to ToolNode, reuse."""
    from bench import bench_checkpoints

    result = bench_checkpoints.run(steps=3)
    assert set(result["variants"]) == set(bench_checkpoints.VARIANTS)
    assert result["variants"]["toolnode"]["ratio"] == 1.0
    assert isinstance(result["target_met"], bool)
    assert result["reused_after_restart"] is True
    assert "ResilientToolsState" in bench_checkpoints.table(result)


def test_builtins_bench_tiny() -> None:
    """Two scenarios without a hang, two stacks: the counts behind the docs' table."""
    from bench import bench_builtins

    result = bench_builtins.run(
        ["write_reset", "duplicate_writes"], stacks=("native_defaults", "ours")
    )
    cells = {(c["scenario"], c["stack"]): c for c in result["cells"]}
    assert set(cells) == {
        (s, k) for s in ("write_reset", "duplicate_writes") for k in ("native_defaults", "ours")
    }
    for cell in cells.values():
        assert set(cell["invariants"]) == set(bench_builtins.INVARIANTS)
    # ToolRetryMiddleware's defaults send the write that resets three times; ours once.
    assert cells[("write_reset", "native_defaults")]["executions"] == {"create_order": 3}
    assert cells[("write_reset", "native_defaults")]["invariants"]["writes_once"] is False
    assert cells[("write_reset", "ours")]["executions"] == {"create_order": 1}
    assert cells[("write_reset", "ours")]["answers"] == {"w": "unknown_outcome"}
    assert cells[("duplicate_writes", "ours")]["invariants"]["twins"] is True
    assert "duplicate_writes" in bench_builtins.markdown(result)


def test_the_builtins_page_shows_every_measured_cell() -> None:
    """docs/builtins.md's table has a row per scenario and a column per stack of the
    saved run (re-running the bench does not break this test)."""
    import json
    from pathlib import Path

    root = Path(__file__).parent.parent
    saved = json.loads((root / "bench" / "results" / "builtins.json").read_text())["builtins"]
    page = (root / "docs" / "builtins.md").read_text()
    assert "| scenario | " + " | ".join(saved["stacks"]) + " |" in page
    for scenario in saved["scenarios"]:
        assert f"| {scenario['name']} |" in page


def test_repair_benchmark_tiny() -> None:
    """The repair benchmark's report: every kind, both tool forms, ToolNode beside us."""
    from bench import bench_repair

    result = bench_repair.run(per_kind=2, schemas=4, min_per_kind=1, logic_all=False)
    for form in bench_repair.FORMS:
        kinds = result["forms"][form]["kinds"]
        assert set(kinds) == set(bench_repair.KINDS)
        for row in kinds.values():
            outcomes = sum(row[k] for k in bench_repair.OUTCOMES)
            assert outcomes == row["n"] == sum(row["toolnode"].values())
    assert set(result["targets"]) >= {"wrong_is_zero", "no_valid_call_altered", "no_crash"}
    assert set(result["all_cases_logic"]) == set(bench_repair.KINDS)
    assert "ToolNode" in bench_repair.table(result)
    assert bench_repair.markdown(result).startswith("| mistake |")


def test_redact_cost_tiny() -> None:
    """The cost of `redact` per call moved here from a 1 ms bound in the unit tests."""
    from bench import bench_redact

    result = bench_redact.run(reps=2)
    assert result["rows"][0]["input"] == "typical tool error"
    assert len(result["rows"]) == 1 + len(bench_redact.ADVERSARIAL)
    assert all(r["us_per_call"] > 0 for r in result["rows"])
    assert "typical tool error" in bench_redact.table(result)


def test_a_variant_that_answers_otherwise_is_never_timed() -> None:
    """A broken build (here: a node whose tool always raises) answers every call with an
    error, which costs less than running the tool: the benchmarks refuse to time it
    instead of showing a speed-up."""
    import asyncio

    import pytest
    from langchain_core.tools import StructuredTool

    from bench import _util, instructions, wrapper
    from langchain_resilient_tools import ResilientToolNode

    def get_value(x: int) -> str:
        """Always fails."""
        raise TypeError("broken")

    broken = StructuredTool.from_function(get_value, name=overhead.TOOL_NAME)
    loop = asyncio.new_event_loop()
    try:
        for mode in ("sync", "async"):
            nodes = dict(overhead.make_nodes(overhead.make_tool()))
            overhead.check_answers(nodes, mode, 3, loop)  # the real variants agree
            nodes["resilient_node"] = ResilientToolNode([broken])
            with pytest.raises(RuntimeError, match="resilient_node answers otherwise"):
                overhead.check_answers(nodes, mode, 3, loop)
            tools = wrapper.variants(wrapper.make_tool())
            wrapper.check_answers(tools, mode, loop)
            assert set(instructions._prepares(mode, instructions.WRAPPER, loop, False))
    finally:
        loop.close()

    class Silent:  # answers with no tool message
        def invoke(self, value: Any, config: Any) -> Any:
            return {"messages": []}

    with pytest.raises(RuntimeError, match="answered no tool call"):
        _util.check_same_answers({"a": Silent()}, "a", "sync", None, lambda v: (None, None))


def test_dangling_tiny() -> None:
    from bench import bench_dangling

    result = bench_dangling.run(rounds=1, sizes=(8,), turns=(1,))
    assert set(result["check_us_per_model_call"]) == {8}
    assert result["checkpoints_per_run"]["before_agent"] == (
        result["checkpoints_per_run"]["before_model"] + 1
    )  # the look adds no node where it is
    assert set(result["repair_sqlite"][1]) == {"messages", "repair_ms", "checkpoint_walk_ms"}
    assert "checkpoints per run" in bench_dangling.table(result)


@pytest.mark.slow  # PostgreSQL
def test_limits_bench_decision_cost_tiny(pg_url: str) -> None:
    """The worker runs of `bench.bench_limits` are the processes of
    tests/test_limits_postgres.py; here its cost part and its table."""
    from bench import bench_limits, report

    cost = bench_limits._decision_cost(pg_url, calls=3, rounds=1)
    assert set(cost["ms_per_call"]) == {"no_limits", "per_process", "shared_postgres"}
    assert set(cost["ms_per_store_op"]) == {"take_token", "acquire_lease", "release_lease"}
    run = {"workers": 2, "quote_calls": 4, "max_per_1s_window": 3, "rate_over_run": 2.0,
           "max_tokens_per_1s_window": 2, "report_calls": 2, "max_in_flight": 1}  # fmt: skip
    result = {"rate": 2, "burst": 1, "cap": 1, "hold_s": 0.1, "bound_per_1s_window": 3,
              "runs": [{**run, "limits": "shared"}, {**run, "limits": "per_process"}],
              "kill": {"lease_s": 2.0, "slot_back_after_kill_s": 1.5}, "cost": cost}  # fmt: skip
    assert "per_process" in bench_limits.table(result)
    assert "most tokens the store gave in 1 s (bound 3)" in report.RENDERERS["limits.json"](result)


def test_journal_bench_tiny(tmp_path: Any) -> None:
    """Two stores, a handful of iterations: the rows, the counts and the page's table."""
    from bench import _util, bench_journal, report

    result = bench_journal.run(scale=0.002, only=("inmemorystore", "sqlite"))
    assert set(result["rows"]) == {"inmemorystore", "sqlite"}
    for row in result["rows"].values():
        assert row["raw_us"] > 0 and len(row["ratio_per_round"]) == bench_journal.ROUNDS
        assert isinstance(row["target_met"], bool)
    sqlite, memory = result["rows"]["sqlite"], result["rows"]["inmemorystore"]
    assert (sqlite["round_trips_per_write"], sqlite["reads_per_write"]) == (2, 0)
    assert (memory["round_trips_per_write"], memory["round_trips_per_read"]) == (2, 0)
    assert "inmemorystore" in bench_journal.table(result)
    _util.save_json({"journal": result}, tmp_path / "journal.json")
    assert "`SqliteStore` (WAL)" in report.render("journal.json", tmp_path)


def test_journal_instructions_arms(monkeypatch: pytest.MonkeyPatch) -> None:
    """The arms counted under valgrind, run without it: the journaled write keeps its
    entry, the unjournaled one none, the raw arm puts the journal's two entries under a
    key of its own; without valgrind the count is skipped, not failed."""
    from langgraph.store.memory import InMemoryStore

    from bench import bench_journal, journal_instructions
    from langchain_resilient_tools.pipeline.journal.logic import NS_JOURNAL
    from langchain_resilient_tools.state.backend import NAMESPACE

    store = InMemoryStore()
    arms = journal_instructions._arms(store, 2)
    before = len(store.search((NAMESPACE, NS_JOURNAL)))  # the arms' one captured write
    arms["off"](1)
    assert len(store.search((NAMESPACE, NS_JOURNAL))) == before
    arms["on"](1)
    assert len(store.search((NAMESPACE, NS_JOURNAL))) == before + 1
    arms["puts"](1)
    (raw,) = store.search(bench_journal.RAW_NS)
    assert raw.value["j"]["kind"] == "receipt"  # the intent, then the receipt over it
    monkeypatch.setattr(journal_instructions.shutil, "which", lambda _name: None)
    assert journal_instructions.measure() is None


def test_hedge_under_load_tiny() -> None:
    """Both conditions side by side, one neighbour process, two steps each: the report's
    shape (the neighbours are started, stopped between blocks, and gone afterwards)."""
    from bench import bench_hedge_load

    result = bench_hedge_load.run(steps=2, block=1, neighbours_n=1, settle_s=0.0)
    assert result["settings"]["neighbours"] == 1 and result["settings"]["burst"] >= 1
    for mode in ("sync", "async"):
        cells = result["modes"][mode]
        for condition in bench_hedge_load.CONDITIONS:
            cell = cells[condition]
            assert cell["ToolNode"]["steps"] == cell["hedge=auto"]["steps"] == 2
            assert set(cell["hedging"]) >= {"hedges_sent", "extra_share", "extra_served_share"}
            assert isinstance(cell["p99_target_met"], bool)
            assert cell["hedge=auto"]["steps_in_full_collection"] >= 0
        assert set(cells["full_collections"]) == {"count", "longest_ms"}
    assert "contended" in bench_hedge_load.markdown(result)
    assert "full garbage collections: sync" in bench_hedge_load.markdown(result)


def test_hedge_under_load_counts_the_full_collections_a_step_met() -> None:
    """A full collection made inside one step of a cell (and one outside every step) is
    counted, and met by that step alone."""
    import gc

    from bench import bench_hedge_load

    cell = bench_hedge_load.Cell("sync", "quiet", "ToolNode")
    with bench_hedge_load.FullCollections() as collections:
        gc.collect()
        cell.spans = [(0.0, 1.0), (time.perf_counter(), float("inf"))]
        gc.collect(1)  # not a full one
        gc.collect()
    assert collections.summary()["count"] == 2
    assert collections.steps_met(cell) == 1
