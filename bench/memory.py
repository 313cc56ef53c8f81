"""Memory: per-call bookkeeping must stay bounded over many distinct calls.

100,000 distinct calls (distinct arguments and ids, spread over 1,000 conversation
threads) go through the pipeline of one `ResilientToolNode`, with every stage of
`STAGES` in place. By default they are driven through `Pipeline.run` directly (the
node's own pipeline and its default policy; `via="node"` sends one AIMessage per call
through ``ResilientToolNode.invoke`` instead, ~10x slower), with `MEMORY_POLICY`. tracemalloc measures the
memory retained after a warm-up, at checkpoints, and the peak.

Bounded structures are plugged in as `Probe`s (``register(Probe(...))``): each reports
its current size and its bound after the run. On top of the registered probes, every
sized attribute of every stage (and of the stages' shared ``env``) is reported automatically,
with its ``maxsize`` as the bound when it has one (cachetools caches do).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from langchain_resilient_tools import ResilientToolNode, ToolPolicy
from langchain_resilient_tools.core.call import Call
from langchain_resilient_tools.pipeline.driver import Pipeline

from . import _util
from .overhead import _DIRECT_CONFIG, TOOL_NAME, make_tool

MEMORY_POLICY = ToolPolicy(timeout=None)
"""The default policy but for the timeout: attempts run inline rather than on a worker
thread. Under tracemalloc a thread hop per call makes 100,000 calls take minutes; the
executor keeps no per-call state for calls that finish (its per-tool counters of
abandoned threads are emptied as threads finish, see the timeouts benchmark)."""

GROWTH_LIMIT_BYTES = 256 * 1024
"""Retained memory may not grow by more than this over the second half of the run."""


@dataclass(frozen=True)
class Probe:
    """A bounded structure to watch: its size now, and the most it may hold."""

    name: str
    size: Callable[[Pipeline], int]
    bound: int | None = None


PROBES: list[Probe] = []
"""Registered probes (other benchmarks add theirs with `register`)."""


def register(probe: Probe) -> Probe:
    """Watch `probe` in every memory run."""
    PROBES.append(probe)
    return probe


def _sized(value: Any) -> int | None:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return None
    try:
        return len(value)
    except TypeError:
        return None


def _bound(value: Any) -> int | None:
    for name in ("maxsize", "maxlen"):  # cachetools caches; deques
        bound = getattr(value, name, None)
        if isinstance(bound, int):
            return bound
    return None


def _attrs(obj: Any) -> dict[str, Any]:
    attrs = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                attrs[slot] = getattr(obj, slot)
    return attrs


def discovered(pipeline: Pipeline) -> list[tuple[str, int, int | None]]:
    """``(name, size, bound)`` of every sized attribute of the stages, their shared
    `Env` and the observer, looking two levels into the package's own objects."""
    found: list[tuple[str, int, int | None]] = []

    def visit(prefix: str, obj: Any, depth: int) -> None:
        for key, value in _attrs(obj).items():
            if key == "env" or (callable(value) and not hasattr(value, "__len__")):
                continue
            size = _sized(value)
            if size is not None:
                found.append((f"{prefix}.{key}", size, _bound(value)))
            elif depth > 0 and type(value).__module__.startswith("langchain_resilient_tools"):
                visit(f"{prefix}.{key}", value, depth - 1)

    for stage in pipeline.stages:
        visit(f"stage:{stage.name}", stage, 2)
    visit("env", pipeline.env, 2)  # what the stages share (`Env`'s typed fields)
    observer = getattr(pipeline, "observer", None)
    if observer is not None:
        visit("observer", observer, 2)
    return found


def _driver(node: ResilientToolNode, via: str) -> Callable[[int], None]:
    tool = node.tools_by_name[TOOL_NAME]
    pipeline = node.pipeline

    if via == "node":

        def by_node(i: int) -> None:
            call = {"name": TOOL_NAME, "args": {"x": i}, "id": f"c{i}", "type": "tool_call"}
            config: RunnableConfig = {
                "configurable": {**_DIRECT_CONFIG["configurable"], "thread_id": f"t{i % 1000}"}
            }
            node.invoke({"messages": [AIMessage(content="", tool_calls=[call])]}, config)

        return by_node

    def by_pipeline(i: int) -> None:
        call = pipeline.new_call(
            call_id=f"c{i}",
            name=TOOL_NAME,
            args={"x": i},
            tool=tool,
            valid_tools=(TOOL_NAME,),
            thread_id=f"t{i % 1000}",
        )
        call.run = _value  # the tool's own function: LangChain's invoke is not ours to measure
        outcome = pipeline.run(call)
        assert outcome.ok, outcome.failure

    return by_pipeline


def _value(call: Call) -> str:
    return f"value {call.args['x']}"


def _retained() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def run(
    *,
    calls: int = 100_000,
    via: str = "pipeline",
    checkpoints: int = 4,
    policy: ToolPolicy | None = None,
) -> dict[str, Any]:
    """Drive `calls` distinct calls; report retained memory at checkpoints and the peak."""
    node = ResilientToolNode([make_tool()], policy=policy or MEMORY_POLICY)
    step = _driver(node, via)
    warmup = min(1000, calls)
    for i in range(warmup):
        step(-1 - i)
    tracemalloc.start()
    try:
        base = _retained()
        tracemalloc.reset_peak()
        marks = {}
        start = time.perf_counter()
        every = max(1, calls // checkpoints)
        for i in range(calls):
            step(i)
            if (i + 1) % every == 0 or i + 1 == calls:
                marks[i + 1] = _retained() - base
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    half = min(marks, key=lambda n: abs(n - calls / 2))
    growth = marks[calls] - marks[half]
    probes = [(p.name, p.size(node.pipeline), p.bound) for p in PROBES]
    probes += discovered(node.pipeline)
    over = [name for name, size, bound in probes if bound is not None and size > bound]
    return {
        "via": via,
        "policy_timeout": (policy or MEMORY_POLICY).timeout,
        "calls": calls,
        "seconds_traced": round(elapsed, 2),
        "retained_bytes_at": marks,
        "retained_growth_second_half_bytes": growth,
        "peak_bytes_above_base": peak,
        "bytes_per_call_retained": round(marks[calls] / calls, 3),
        "probes": [{"name": n, "size": s, "bound": b} for n, s, b in probes],
        "bounded": growth <= GROWTH_LIMIT_BYTES and not over,
    }


def table(result: dict[str, Any]) -> str:
    rows = [[n, b] for n, b in result["retained_bytes_at"].items()]
    text = [
        f"{result['calls']} distinct calls via {result['via']} "
        f"({result['seconds_traced']} s under tracemalloc)",
        _util.format_table(["after calls", "retained bytes"], rows),
        f"peak above base: {result['peak_bytes_above_base']} B; growth over second half: "
        f"{result['retained_growth_second_half_bytes']} B (limit {GROWTH_LIMIT_BYTES}); "
        f"bounded: {result['bounded']}",
    ]
    if result["probes"]:
        text.append(
            _util.format_table(
                ["structure", "size", "bound"],
                [[p["name"], p["size"], p["bound"]] for p in result["probes"]],
            )
        )
    return "\n".join(text)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.memory")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--via", choices=("pipeline", "node"), default="pipeline")
    args = parser.parse_args(argv)
    result = run(calls=500 if args.quick else 100_000, via=args.via)
    print(table(result))
    return result


if __name__ == "__main__":
    main()
