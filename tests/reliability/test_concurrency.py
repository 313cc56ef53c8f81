"""1,000 calls at once: every one answered exactly once, with its own correct result."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from langchain_resilient_tools import (
    ResilientTool,
    ResilientToolNode,
    ToolPolicy,
)
from langchain_resilient_tools.runtime.executor import default_runner, dispatch_pool
from langchain_resilient_tools.testing import tool_call
from tests.reliability.invariants import STATS
from tests.support.graphs import tools_graph

N = 1000


def square_tool(executions: Counter[int]) -> BaseTool:
    """``get_square(n)``: n*n; every 10th call raises ValueError (a tool error)."""

    def run(n: int) -> str:
        executions[n] += 1
        if n % 10 == 7:
            raise ValueError(f"n={n} is unlucky")
        return f"{n}^2={n * n}"

    async def arun(n: int) -> str:
        await asyncio.sleep(0)
        return run(n)

    return StructuredTool.from_function(
        func=run, coroutine=arun, name="get_square", description="n*n"
    )


def check(answers: list[ToolMessage], executions: Counter[int]) -> None:
    counts = Counter(m.tool_call_id for m in answers)
    assert counts == Counter({f"c{i}": 1 for i in range(N)})
    for m in answers:
        n = int(m.tool_call_id[1:])
        if n % 10 == 7:
            assert m.status == "error" and '"tool_error"' in str(m.content)
        else:
            assert m.status == "success" and m.content == f"{n}^2={n * n}", m.content
    assert all(executions[n] == 1 for n in range(N))
    for pool in (default_runner().pool, dispatch_pool()):
        assert pool.threads <= pool.max_workers
    errors = sum(1 for m in answers if m.status == "error")
    STATS.add(scenarios=1, calls=N, faults=errors)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_thousand_calls_through_the_node(mode: str) -> None:
    executions: Counter[int] = Counter()
    app = tools_graph(ResilientToolNode([square_tool(executions)], policy=ToolPolicy(dedup="off")))
    ai = AIMessage("", tool_calls=[tool_call("get_square", {"n": i}, id=f"c{i}") for i in range(N)])
    if mode == "sync":
        state = app.invoke({"messages": [ai]})
    else:
        state = asyncio.run(app.ainvoke({"messages": [ai]}))
    check([m for m in state["messages"] if isinstance(m, ToolMessage)], executions)
    assert len(state["tool_errors"]) == N // 10


@pytest.mark.parametrize("native_async", [True, False], ids=["async-tool", "sync-tool"])
def test_thousand_concurrent_resilient_tool_ainvokes(native_async: bool) -> None:
    executions: Counter[int] = Counter()
    inner = square_tool(executions)
    if not native_async:
        inner.coroutine = None  # type: ignore[attr-defined]
    # A timeout (so sync attempts run on the workers), not a bound: 1,000 calls at once on
    # a busy machine may each take seconds.
    tool = ResilientTool.wrap(inner, policy=ToolPolicy(timeout=120.0))

    async def main() -> list[ToolMessage]:
        calls = [tool_call("get_square", {"n": i}, id=f"c{i}") for i in range(N)]
        return list(await asyncio.gather(*(tool.ainvoke(c) for c in calls)))

    check(asyncio.run(main()), executions)
