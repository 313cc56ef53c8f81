"""Tail latency: hedged reads against a heavy-tailed read service.

``python -m bench.bench_tail [--quick] [--steps N]``

A fake read service answers most calls in about `TYPICAL_S` (50 ms) and stalls on
`STALL_P` of them for `STALL_S`. Real stalls last seconds; here they are cut to 0.6 s
so that the run takes a few minutes. That makes the p99 target harder, not easier: a
hedged step takes the hedge delay (about 80 ms here) plus one ordinary answer (about
55 ms) plus the step's own work, and 0.3x of a 0.6 s stall leaves about 180 ms for all
of it (0.3x of a 2 s stall would leave 600 ms). Whether a call stalls is drawn from its
query and its attempt number, so every variant, and every run, meets the same
stragglers; a hedge is a new attempt and draws its own latency (3% of the hedges stall
too: those steps stay slow). Then a partial outage: every call takes `OUTAGE_S`, for
which no hedge helps; its extra attempts must stay within the budget (what the bucket
saved before, at most a burst of 10, plus 5% of its calls; over the whole run, 5% of the
calls, the burst included).

One step is one AIMessage with `READS` parallel reads. Four variants run side by side
(one thread, or one task, each; the service only sleeps): `ToolNode`, `ToolNode` with
langchain's `ToolRetryMiddleware` (its ``wrap_tool_call``), `ResilientToolNode` with
the default policy, and with ``hedge="auto"``. Reported: p50/p95/p99 step latency (the
whole ``invoke`` / ``ainvoke`` of the node, timed by the caller) and
the extra attempts (service executions beyond one per call). Writes
``bench/results/tail.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolNode

from langchain_resilient_tools import Hedge, ResilientToolNode, ToolPolicy

from . import _util
from .overhead import _DIRECT_CONFIG

TYPICAL_S = 0.05
STALL_P = 0.03
STALL_S = 0.6
OUTAGE_S = 0.3
READS = 5
STEPS = 500
OUTAGE_STEPS = 100
VARIANTS = ("ToolNode", "ToolNode+ToolRetryMiddleware", "ResilientToolNode", "hedge=auto")
TARGET_P99_RATIO = 0.3
TARGET_EXTRA = 0.05


class ReadService:
    """The fake service: latency by query and attempt; counts executions."""

    def __init__(self, seed: str) -> None:
        self.seed = seed
        self.outage = False
        self.executions: Counter[str] = Counter()
        self._lock = threading.Lock()

    def latency(self, query: str) -> float:
        with self._lock:
            self.executions[query] += 1
            n = self.executions[query]
        rng = random.Random(f"{self.seed}/{query}/{n}")
        if self.outage:
            return OUTAGE_S * rng.uniform(0.9, 1.1)
        if rng.random() < STALL_P:
            return STALL_S
        return TYPICAL_S * rng.lognormvariate(0.0, 0.1)

    def tool(self) -> BaseTool:
        def get_doc(query: str) -> str:
            """Read one document."""
            time.sleep(self.latency(query))
            return f"doc for {query}"

        async def aget_doc(query: str) -> str:
            await asyncio.sleep(self.latency(query))
            return f"doc for {query}"

        return StructuredTool.from_function(
            func=get_doc, coroutine=aget_doc, name="get_doc", description="Read one document."
        )


def _node(variant: str, tool: BaseTool) -> Any:
    if variant == "ToolNode":
        return ToolNode([tool])
    if variant == "ToolNode+ToolRetryMiddleware":
        retry = ToolRetryMiddleware(max_retries=2, initial_delay=0.05, jitter=False)
        return ToolNode([tool], wrap_tool_call=retry.wrap_tool_call,
                        awrap_tool_call=retry.awrap_tool_call)  # fmt: skip
    if variant == "ResilientToolNode":
        return ResilientToolNode([tool])
    return ResilientToolNode([tool], policy=ToolPolicy(hedge="auto"))


def _message(phase: str, step: int) -> dict[str, Any]:
    calls = [
        {"name": "get_doc", "args": {"query": f"{phase}{step}-{i}"}, "id": f"{phase}{step}-{i}",
         "type": "tool_call"}
        for i in range(READS)
    ]  # fmt: skip
    return {"messages": [AIMessage("", tool_calls=calls)]}


def _phases(steps: int, outage_steps: int) -> list[tuple[str, int]]:
    return [("tail", steps), ("outage", outage_steps)]


def _summary(
    latencies: list[float], service: ReadService, calls: int, seconds: float
) -> dict[str, Any]:
    ordered = sorted(latencies)

    def q(p: float) -> float:
        return round(ordered[max(0, math.ceil(p * len(ordered)) - 1)] * 1000, 1)

    extra = sum(service.executions.values()) - calls
    return {
        "steps": len(latencies),
        "p50_ms": q(0.50), "p95_ms": q(0.95), "p99_ms": q(0.99),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1),
        "extra_attempts": extra, "extra_share": round(extra / calls, 4),
        "seconds": round(seconds, 1),
    }  # fmt: skip


def _run_sync(variant: str, steps: int, outage_steps: int, out: dict[str, Any]) -> None:
    service = ReadService("sync")
    node = _node(variant, service.tool())
    for phase, n in _phases(steps, outage_steps):
        service.outage = phase == "outage"
        service.executions.clear()
        latencies = []
        begin = time.perf_counter()
        for step in range(n):
            start = time.perf_counter()
            node.invoke(_message(phase, step), _DIRECT_CONFIG)
            latencies.append(time.perf_counter() - start)
        out[phase] = _summary(latencies, service, n * READS, time.perf_counter() - begin)


async def _run_async(variant: str, steps: int, outage_steps: int, out: dict[str, Any]) -> None:
    service = ReadService("async")
    node = _node(variant, service.tool())
    for phase, n in _phases(steps, outage_steps):
        service.outage = phase == "outage"
        service.executions.clear()
        latencies = []
        begin = time.perf_counter()
        for step in range(n):
            start = time.perf_counter()
            await node.ainvoke(_message(phase, step), _DIRECT_CONFIG)
            latencies.append(time.perf_counter() - start)
        out[phase] = _summary(latencies, service, n * READS, time.perf_counter() - begin)


def _side_by_side(run: Callable[[str, dict[str, Any]], None]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {v: {} for v in VARIANTS}
    threads = [threading.Thread(target=run, args=(v, results[v])) for v in VARIANTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _budget_bound(calls: int) -> int:
    """Most hedges the default budget allows over `calls` first attempts that follow
    others: what the bucket saved before them (at most `Hedge.burst` tokens) plus 5% of
    them."""
    hedge = Hedge()
    return math.floor(hedge.burst + hedge.budget * calls)


def _verdict(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    base, plain, hedged = cells["ToolNode"], cells["ResilientToolNode"], cells["hedge=auto"]
    ratio = hedged["tail"]["p99_ms"] / base["tail"]["p99_ms"]
    outage = hedged["outage"]
    bound = _budget_bound(OUTAGE_STEPS * READS)
    return {
        "p99_ratio_to_toolnode": round(ratio, 3),
        "p99_target_met": ratio <= TARGET_P99_RATIO,
        "extra_share": hedged["tail"]["extra_share"],
        "extra_target_met": hedged["tail"]["extra_share"] <= TARGET_EXTRA,
        "outage_extra_attempts": outage["extra_attempts"],
        "outage_budget_bound": bound,
        "outage_within_budget": outage["extra_attempts"] <= bound,
        "outage_p50_ratio_to_default": round(outage["p50_ms"] / plain["outage"]["p50_ms"], 3),
    }


def run(*, steps: int = STEPS, outage_steps: int = OUTAGE_STEPS) -> dict[str, Any]:
    global OUTAGE_STEPS
    OUTAGE_STEPS = outage_steps
    modes: dict[str, Any] = {}
    modes["sync"] = _side_by_side(lambda v, out: _run_sync(v, steps, outage_steps, out))

    async def all_async() -> dict[str, dict[str, Any]]:
        results: dict[str, dict[str, Any]] = {v: {} for v in VARIANTS}
        await asyncio.gather(*(_run_async(v, steps, outage_steps, results[v]) for v in VARIANTS))
        return results

    modes["async"] = asyncio.run(all_async())
    return {
        "settings": {
            "typical_s": TYPICAL_S,
            "stall_p": STALL_P,
            "stall_s": STALL_S,
            "outage_s": OUTAGE_S,
            "reads_per_step": READS,
            "steps": steps,
            "outage_steps": outage_steps,
        },
        "modes": modes,
        "verdict": {mode: _verdict(cells) for mode, cells in modes.items()},
    }


def table(result: dict[str, Any]) -> str:
    rows = []
    for mode, cells in result["modes"].items():
        for variant, cell in cells.items():
            t, o = cell["tail"], cell["outage"]
            rows.append([mode, variant, t["p50_ms"], t["p95_ms"], t["p99_ms"],
                         f"{100 * t['extra_share']:.1f}%", o["p50_ms"], o["p99_ms"],
                         f"{100 * o['extra_share']:.1f}%"])  # fmt: skip
    headers = ["mode", "variant", "p50 ms", "p95 ms", "p99 ms", "extra",
               "outage p50", "outage p99", "outage extra"]  # fmt: skip
    lines = [_util.format_table(headers, rows)]
    for mode, v in result["verdict"].items():
        lines.append(f"{mode}: {v}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, *, quick: bool = False) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=STEPS)
    args = parser.parse_args(argv)
    quick = quick or args.quick
    steps, outage = (40, 10) if quick else (args.steps, OUTAGE_STEPS)
    result = run(steps=steps, outage_steps=outage)
    print(table(result))
    if not quick:
        _util.save_json({"meta": _util.run_metadata(list(argv or [])), **result},
                        _util.RESULTS_DIR / "tail.json")  # fmt: skip
    return result


if __name__ == "__main__":
    main()
