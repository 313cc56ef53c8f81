"""Cost of the dedup and result-check stages per call, and dedup memory under load.

Run: ``.venv/bin/python -m bench.bench_dedup [--quick] [--reps N] [--queries N]``

Rows (microseconds per call; the variants run interleaved, in rotated order, over 21
rounds of ``--reps`` repetitions; a stage's cost is the median over rounds of its time
minus the bare driver's time in the same round):
- ``pipeline, no stages``: `Pipeline.run` with an empty stage list (the driver only);
- ``+ dedup (distinct queries)``: the dedup stage deciding, recording and finishing a
  call it has not seen (the common case);
- ``+ dedup (repeated query)``: the dedup stage answering from the ledger;
- ``+ checks (4 built-ins)``: `empty_result`, `empty_field`, `error_prefix`,
  `mcp_is_error` over a small JSON result;
- ``ToolNode`` / ``ResilientToolNode``: one call of a trivial tool through a plain
  `ToolNode` (the baseline, same run) and through `ResilientToolNode` with dedup on
  (distinct queries) and off.

Memory: 100,000 distinct queries through the dedup stage (``tracemalloc``, traced
Python memory after a `gc.collect`), with the default bound of `Dedup.max_entries`
and with a TTL that expires entries. Nothing is asserted; the table is printed and
the numbers are written to ``bench/results/dedup.json``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from langchain_resilient_tools import Dedup, ResilientToolNode, ToolPolicy
from langchain_resilient_tools.checks import empty_field, empty_result, error_prefix, mcp_is_error
from langchain_resilient_tools.core.policy import PolicyResolver
from langchain_resilient_tools.pipeline.checks import ChecksStage
from langchain_resilient_tools.pipeline.dedup.stage import DedupStage
from langchain_resilient_tools.pipeline.driver import Pipeline
from langchain_resilient_tools.pipeline.stage import Stage

from . import _util

_CONFIG: RunnableConfig = {"configurable": {"__pregel_runtime": Runtime()}}
RESULT = '{"organic": [{"title": "a", "link": "https://example.com"}], "total": 1}'
CHECKS = [empty_result, empty_field("organic"), error_prefix(), mcp_is_error]


def pipeline_call(
    stages: Sequence[type[Stage]], policy: ToolPolicy, *, distinct: bool
) -> Callable[[], Any]:
    """One `Pipeline.run` of a trivial search call per invocation."""
    pipeline = Pipeline(PolicyResolver(policy), stages=stages)
    counter = itertools.count()

    def run() -> Any:
        query = f"q{next(counter)}" if distinct else "q"
        call = pipeline.new_call(
            call_id="c", name="search_web", args={"query": query, "page": 1}, tool=None
        )
        call.run = lambda c: RESULT
        return pipeline.run(call)

    return run


def node_call(node: Any) -> Callable[[], Any]:
    counter = itertools.count()

    def run() -> Any:
        tc = {"name": "search_web", "args": {"query": f"q{next(counter)}"}, "id": "c1"}
        return node.invoke({"messages": [AIMessage("", tool_calls=[tc])]}, _CONFIG)

    return run


def interleaved_us(
    variants: dict[str, tuple[Callable[[], Any], int]], rounds: int
) -> dict[str, list[float]]:
    """Per-round mean microseconds per call of each variant, run in rotated order."""
    names = list(variants)
    for fn, _ in variants.values():
        fn()  # warm caches
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        gc.collect()
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn, reps = variants[name]
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            out[name].append((time.perf_counter() - start) / reps * 1e6)
    return out


def stage_rows(reps: int, rounds: int) -> tuple[list[tuple[str, float]], dict[str, float]]:
    """Median us/call per variant, and each stage's median paired cost over the driver."""

    def search_web(query: str) -> str:
        """Search the web."""
        return RESULT

    tool = StructuredTool.from_function(search_web)
    base = ToolPolicy(timeout=None)
    checked = base.model_copy(update={"result_checks": CHECKS})
    node_reps = max(reps // 20, 20)
    variants = {
        "pipeline, no stages": (pipeline_call([], base, distinct=True), reps),
        "+ dedup (distinct queries)": (pipeline_call([DedupStage], base, distinct=True), reps),
        "+ dedup (repeated query)": (pipeline_call([DedupStage], base, distinct=False), reps),
        "+ checks (4 built-ins)": (pipeline_call([ChecksStage], checked, distinct=True), reps),
        "ToolNode (baseline)": (node_call(ToolNode([tool])), node_reps),
        "ResilientToolNode, dedup on": (
            node_call(ResilientToolNode([tool], policy=base)),
            node_reps,
        ),
        "ResilientToolNode, dedup off": (
            node_call(ResilientToolNode([tool], policy=ToolPolicy(timeout=None, dedup="off"))),
            node_reps,
        ),
    }
    per_round = interleaved_us(variants, rounds)
    driver = per_round["pipeline, no stages"]
    medians = [(name, statistics.median(v)) for name, v in per_round.items()]
    costs = {
        name: statistics.median(a - b for a, b in zip(v, driver, strict=True))
        for name, v in per_round.items()
        if name.startswith("+")
    }
    return medians, costs


def memory_rows(queries: int) -> list[dict[str, Any]]:
    """Traced memory of the dedup stage after `queries` distinct queries."""
    rows = []
    variants = {
        "max_entries=1024 (default)": ToolPolicy(timeout=None),
        "max_entries=100000": ToolPolicy(timeout=None, dedup=Dedup(max_entries=100_000)),
        "ttl=0.05 s, max_entries=100000": ToolPolicy(
            timeout=None, dedup=Dedup(max_entries=100_000, ttl_s=0.05)
        ),
    }
    checkpoints = sorted({queries // 100, queries // 10, queries})
    for label, policy in variants.items():
        run = pipeline_call([DedupStage], policy, distinct=True)
        gc.collect()
        tracemalloc.start()
        base, _ = tracemalloc.get_traced_memory()
        done = 0
        row: dict[str, Any] = {"variant": label}
        for mark in checkpoints:
            for _ in range(mark - done):
                run()
            done = mark
            gc.collect()
            now, _ = tracemalloc.get_traced_memory()
            row[f"kib_after_{mark}"] = round((now - base) / 1024, 1)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        row["peak_kib"] = round((peak - base) / 1024, 1)
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100_000)
    args = parser.parse_args(argv)
    reps = 200 if args.quick else args.reps
    queries = 5000 if args.quick else args.queries

    timings, costs = stage_rows(reps, rounds=5 if args.quick else 21)
    print(
        _util.format_table(
            ["variant", "us/call (median)", "stage cost us (paired median)"],
            [(name, us, costs.get(name, "")) for name, us in timings],
        )
    )
    memory = memory_rows(queries)
    print()
    headers = list(memory[0])
    print(_util.format_table(headers, [[row[h] for h in headers] for row in memory]))
    result = {
        "meta": _util.run_metadata(list(argv or [])),
        "reps": reps,
        "us_per_call": {name: round(us, 2) for name, us in timings},
        "stage_cost_us": {name: round(us, 2) for name, us in costs.items()},
        "memory_queries": queries,
        "memory": memory,
    }
    path = _util.save_json(result, _util.RESULTS_DIR / "dedup.json")
    print(f"\nresults: {path}")
    return result


if __name__ == "__main__":
    main()
