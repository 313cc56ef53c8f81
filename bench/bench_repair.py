"""Cost of argument repair and validation per call, next to the ToolNode baseline.

Run: ``.venv/bin/python -m bench.bench_repair [--reps N]``

Rows:
- ``repair+validate``: `repair_call` then `check` (the work of the repair and validate
  stages) for a valid call, a call with a wrong name and a numeric string, and a call
  whose JSON is broken (single quotes, trailing comma);
- ``ToolNode``: one call of a trivial tool through a plain `ToolNode` (the baseline);
- ``ResilientToolNode``: the same through `ResilientToolNode`, for each kind of call
  (the broken one arrives as an ``invalid_tool_call`` and is repaired, then run).

Times are microseconds per call, the best of 5 runs of ``--reps`` repetitions each
(`time.perf_counter`). Nothing is asserted: the numbers are for reading.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from langchain_resilient_tools import ResilientToolNode, ToolPolicy
from langchain_resilient_tools.pipeline.repair.logic import repair_call
from langchain_resilient_tools.pipeline.schema import tool_schema
from langchain_resilient_tools.pipeline.validate.logic import check

from ._util import per_call_us

_CONFIG: RunnableConfig = {"configurable": {"__pregel_runtime": Runtime()}}

VALID: dict[str, Any] = {"user_id": 42, "quantity": 2, "tags": ["a", "b"], "express": True}
REPAIRED: dict[str, Any] = {"userId": 42, "quantity": " 2 ", "tags": "a", "express": "TRUE"}
BROKEN = "{'user_id': 42, 'quantity': 2, 'tags': ['a', 'b'], 'express': true,}"


def make_tool() -> BaseTool:
    def get_order(
        user_id: int, quantity: int = 1, tags: list[str] | None = None, express: bool = False
    ) -> str:
        """Look up an order."""
        return "ok"

    return StructuredTool.from_function(get_order)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2000)
    reps = parser.parse_args().reps
    tool = make_tool()
    ts = tool_schema(tool)
    aliases: dict[str, list[str]] = {}

    def pure(args: Any) -> Callable[[], Any]:
        def run() -> Any:
            fixed = repair_call(args, ts.facts, aliases)
            assert fixed.args is not None
            return check(ts, fixed.args, reject_unknown=False)

        return run

    def message(kind: str) -> dict[str, Any]:
        if kind == "broken":
            bad = {"name": "get_order", "args": BROKEN, "id": "c1", "error": "bad JSON"}
            ai = AIMessage("", invalid_tool_calls=[{**bad, "type": "invalid_tool_call"}])
        else:
            args = VALID if kind == "valid" else REPAIRED
            ai = AIMessage("", tool_calls=[{"name": "get_order", "args": args, "id": "c1"}])
        return {"messages": [ai]}

    plain = ToolNode([tool])
    resilient = ResilientToolNode([tool], policy=ToolPolicy(timeout=None, dedup="off"))
    node_reps = max(reps // 10, 50)
    rows = [
        ("repair+validate, valid call", per_call_us(pure(VALID), reps)),
        ("repair+validate, repaired call", per_call_us(pure(REPAIRED), reps)),
        ("repair+validate, broken JSON", per_call_us(pure(BROKEN), reps)),
        (
            "ToolNode baseline, valid call",
            per_call_us(lambda: plain.invoke(message("valid"), _CONFIG), node_reps),
        ),
    ]
    for kind in ("valid", "repaired", "broken"):
        payload = message(kind)
        rows.append(
            (
                f"ResilientToolNode, {kind} call",
                per_call_us(lambda p=payload: resilient.invoke(p, _CONFIG), node_reps),
            )
        )
    width = max(len(name) for name, _ in rows)
    print(f"{'per call (sync, 1 call per message)':<{width}}  {'us':>9}")
    for name, us in rows:
        print(f"{name:<{width}}  {us:9.1f}")


if __name__ == "__main__":
    main()
