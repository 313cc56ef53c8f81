"""Code that cancels the task it runs in, inside the pipeline, means what it means under ToolNode.

An async attempt drives its coroutine from the caller's own task (`runtime.drive`), so
``asyncio.current_task()`` there is the caller's, as for a coroutine ToolNode awaits
directly. ``asyncio.timeout()``, ``asyncio.TaskGroup`` (and ``asyncio.wait_for`` from
Python 3.12) cancel that task: a user's ``awrap_tool_call`` or another middleware that
bounds the tool with one must catch its own `TimeoutError`, not see the graph's run
cancelled. A cancellation from outside still cancels the run, as it does ToolNode's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import MessagesState
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime

from langchain_resilient_tools import (
    ResilientTool,
    ResilientToolNode,
    ResilientToolsMiddleware,
    ToolPolicy,
)
from langchain_resilient_tools.testing import ScriptedChatModel
from tests.support.graphs import tools_graph

CONFIG: Any = {"configurable": {"__pregel_runtime": Runtime()}}
POLICY = ToolPolicy(timeout=20.0)
"""The layer's own deadline: far later than the user's bounds (which fire at once)."""
BOUNDED = "the user's bound fired"
Execute = Callable[[ToolCallRequest], Awaitable[Any]]


def hanging_tool() -> BaseTool:
    async def get_page(url: str) -> str:
        """Fetch a page (never answers)."""
        await asyncio.Event().wait()
        return "never"

    return StructuredTool.from_function(coroutine=get_page, name="get_page")


def _bounded(request: ToolCallRequest) -> ToolMessage:
    return ToolMessage(BOUNDED, tool_call_id=request.tool_call["id"], name="get_page")


async def with_timeout(request: ToolCallRequest, execute: Execute) -> Any:
    try:
        async with asyncio.timeout(0):  # expires on the loop's next turn: no real wait
            return await execute(request)
    except TimeoutError:
        return _bounded(request)


async def with_wait_for(request: ToolCallRequest, execute: Execute) -> Any:
    try:
        # Not 0, which waits for a task of its own on every Python: above 0, from 3.12,
        # wait_for is asyncio.timeout (the current task cancelled at the deadline).
        return await asyncio.wait_for(execute(request), 1e-9)
    except TimeoutError:
        return _bounded(request)


async def with_task_group(request: ToolCallRequest, execute: Execute) -> Any:
    async def fails() -> None:
        raise LookupError("a sibling failed")

    try:
        async with asyncio.TaskGroup() as group:  # cancels the current task when a child fails
            group.create_task(fails())
            return await execute(request)
    except ExceptionGroup as group_error:
        if not group_error.subgroup(LookupError):
            raise
        return _bounded(request)


BOUNDS = {"asyncio.timeout": with_timeout, "wait_for": with_wait_for, "TaskGroup": with_task_group}


def _call(i: int = 1) -> dict[str, Any]:
    return {"name": "get_page", "args": {"url": f"u{i}"}, "id": f"c{i}", "type": "tool_call"}


async def _run_node(node: Any, calls: int) -> list[Any]:
    graph = tools_graph(node, MessagesState)
    ai = AIMessage("", tool_calls=[_call(i) for i in range(calls)])
    out = await graph.ainvoke({"messages": [ai]})
    return [m.content for m in out["messages"][1:]]


@pytest.mark.parametrize("bound", list(BOUNDS))
@pytest.mark.parametrize("calls", [1, 3])
def test_a_user_wrapper_that_bounds_the_tool_answers_as_under_toolnode(
    bound: str, calls: int
) -> None:
    wrap = BOUNDS[bound]
    tool = hanging_tool()
    theirs = asyncio.run(_run_node(ToolNode([tool], awrap_tool_call=wrap), calls))
    ours = asyncio.run(
        _run_node(ResilientToolNode([tool], policy=POLICY, awrap_tool_call=wrap), calls)
    )
    wrapped = ResilientTool.wrap(tool, policy=POLICY)  # the pipeline inside the user's bound
    outside = asyncio.run(_run_node(ToolNode([wrapped], awrap_tool_call=wrap), calls))
    assert theirs == [BOUNDED] * calls
    assert ours == theirs
    assert outside == theirs


class Bounding(AgentMiddleware):
    """Another middleware, inside ours, that bounds each tool call itself."""

    def __init__(self, bound: Callable[[ToolCallRequest, Execute], Awaitable[Any]]) -> None:
        super().__init__()
        self.bound = bound

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Execute) -> Any:
        return await self.bound(request, handler)


@pytest.mark.parametrize("bound", list(BOUNDS))
def test_a_middleware_inside_ours_that_bounds_the_tool_answers_the_call(bound: str) -> None:
    script = [AIMessage("", tool_calls=[_call()]), AIMessage("done")]
    agent = create_agent(
        ScriptedChatModel(script=script),
        tools=[hanging_tool()],
        middleware=[ResilientToolsMiddleware(policy=POLICY), Bounding(BOUNDS[bound])],
    )
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}))
    answers = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in answers] == [BOUNDED]
    assert out["messages"][-1].content == "done"


def test_the_deadline_after_a_bound_the_wrapper_caught_is_the_layers_timeout() -> None:
    """A wrapper that caught its own bound and then waits again meets the attempt's
    deadline: the call is answered `timeout`, not cancelled (its cancellation was
    consumed by the bound)."""

    async def bound_then_wait(request: ToolCallRequest, execute: Execute) -> Any:
        try:
            async with asyncio.timeout(0):
                return await execute(request)
        except TimeoutError:
            return await execute(request)  # unbounded this time: the layer's deadline ends it

    node = ResilientToolNode(
        [hanging_tool()], policy=ToolPolicy(timeout=0.05), awrap_tool_call=bound_then_wait
    )
    (answer,) = asyncio.run(_run_node(node, 1))
    assert json.loads(answer)["error"] == "timeout"


async def _cancelled_once_started(node: Any, started: asyncio.Event) -> str:
    """Run one call through `node`, cancel the run once the tool has started: "cancelled"
    if the run ends cancelled (within 30 s), else the content of its answer."""
    task = asyncio.ensure_future(
        node.ainvoke({"messages": [AIMessage("", tool_calls=[_call()])]}, CONFIG)
    )
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    try:
        out = await asyncio.wait_for(task, 30)
    except asyncio.CancelledError:
        return "cancelled"
    return str(out["messages"][0].content)


def _answering_tool(started: asyncio.Event) -> BaseTool:
    async def get_page(url: str) -> str:
        """Answers its own cancellation."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "stopped"
        return "never"

    return StructuredTool.from_function(coroutine=get_page, name="get_page")


@pytest.mark.parametrize("adapter", ["toolnode", "node", "wrapper"])
def test_a_run_cancelled_from_outside_is_cancelled_even_if_the_tool_answers(adapter: str) -> None:
    """The tool hears of it (what it waits for is cancelled) and answers; the run is
    still cancelled, as ToolNode's is (its gathered task raises `CancelledError`)."""

    async def main() -> str:
        started = asyncio.Event()
        tool = _answering_tool(started)
        node: Any = {
            "toolnode": lambda: ToolNode([tool]),
            "node": lambda: ResilientToolNode([tool], policy=POLICY),
            "wrapper": lambda: ToolNode([ResilientTool.wrap(tool, policy=POLICY)]),
        }[adapter]()
        return await _cancelled_once_started(node, started)

    assert asyncio.run(main()) == "cancelled"


def test_a_run_cancelled_from_outside_ends_at_the_deadline_if_the_tool_ignores_it() -> None:
    """A tool that ignores its cancellation does not hold a cancelled caller past the
    attempt's deadline: the caller gets `CancelledError` then (the tool goes on alone)."""

    async def main() -> tuple[str, list[str]]:
        started, heard = asyncio.Event(), []

        async def get_page(url: str) -> str:
            """Ignores its cancellation."""
            started.set()
            while True:
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    heard.append("cancelled")

        tool = StructuredTool.from_function(coroutine=get_page, name="get_page")
        node = ResilientToolNode([tool], policy=ToolPolicy(timeout=0.05))
        return await _cancelled_once_started(node, started), heard

    outcome, heard = asyncio.run(main())
    assert outcome == "cancelled"
    assert heard[:1] == ["cancelled"]  # the cancellation reached the tool
