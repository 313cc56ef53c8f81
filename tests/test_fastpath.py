"""The hot path of a healthy call (issue 34): what it costs is counted here, not timed.

An async attempt's deadline needs no task and no loop timer of its own
(`runtime.drive`, `runtime.alarms`): the only task of a call to a fast async tool is
the one LangChain makes for the tool's coroutine, and one loop timer serves the
deadlines of every call in flight. What it must still do is checked beside it: the
deadline holds for a tool that ignores its cancellation, a cancelled caller cancels
the tool, and the tool runs in a copy of the caller's context.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Coroutine
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from langchain_resilient_tools import ResilientTool, ResilientToolNode, RetryPolicy, ToolPolicy

CONFIG: Any = {"configurable": {"__pregel_runtime": Runtime()}}
SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="caller's")


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the tasks and timers made on it."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks = 0
        self.timers = 0

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        self.tasks += 1
        return super().create_task(coro, **kwargs)

    def call_at(self, when: float, callback: Any, *args: Any, **kwargs: Any) -> Any:
        self.timers += 1
        return super().call_at(when, callback, *args, **kwargs)


def run_counted(coro: Coroutine[Any, Any, Any]) -> tuple[Any, CountingLoop]:
    loop = CountingLoop()
    try:
        return loop.run_until_complete(coro), loop
    finally:
        loop.close()


def fast_tool() -> BaseTool:
    async def get_value(x: int) -> str:
        """Return a value for x."""
        SEEN.set("the tool's")
        return f"value {x}"

    return StructuredTool.from_function(coroutine=get_value, name="get_value")


def message(i: int) -> dict[str, Any]:
    call = {"name": "get_value", "args": {"x": i}, "id": f"c{i}", "type": "tool_call"}
    return {"messages": [AIMessage("", tool_calls=[call])]}


CALLS = 20


@pytest.mark.parametrize("adapter", ["node", "wrapper"])
def test_an_async_attempt_makes_no_task_and_no_timer_of_its_own(adapter: str) -> None:
    tool = fast_tool()
    node: Any = (
        ResilientToolNode([tool]) if adapter == "node" else ToolNode([ResilientTool.wrap(tool)])
    )
    plain = ToolNode([tool])

    async def calls(node: Any) -> list[Any]:
        return [await node.ainvoke(message(i), CONFIG) for i in range(CALLS)]

    ours, loop = run_counted(calls(node))
    theirs, plain_loop = run_counted(calls(plain))
    assert [o["messages"][0].content for o in ours] == [f"value {i}" for i in range(CALLS)]
    assert [o["messages"] for o in ours] == [o["messages"] for o in theirs]  # as ToolNode's
    # ToolNode alone makes two tasks a call: LangChain's for the tool's coroutine, and
    # one of its own (`asyncio.gather`); the node makes only the first, the wrapper
    # adds none to ToolNode's.
    assert loop.tasks <= plain_loop.tasks - (CALLS if adapter == "node" else 0)
    assert loop.timers <= 1  # one loop timer for every deadline (the first one's)
    assert SEEN.get() == "caller's"


def test_an_async_tool_runs_in_a_copy_of_its_callers_context() -> None:
    async def get_value(x: int) -> str:
        """Return what the caller set, then set it anew."""
        before = SEEN.get()
        SEEN.set("the tool's")
        await asyncio.sleep(0)  # a step later, still its own copy
        return f"{before} {SEEN.get()} {x}"

    tool = ResilientTool.wrap(StructuredTool.from_function(coroutine=get_value, name="get_value"))

    async def main() -> Any:
        SEEN.set("the caller's")
        out = await tool.ainvoke({"x": 1})
        return out, SEEN.get()

    assert asyncio.run(main()) == ("the caller's the tool's 1", "the caller's")


def test_a_deadline_holds_for_a_tool_that_ignores_it_and_cancels_it() -> None:
    cancels: list[str] = []

    async def get_slow(x: int) -> str:
        """Ignores the first cancellation."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancels.append("first")
            try:
                await asyncio.sleep(0.5)
            except asyncio.CancelledError:
                cancels.append("second")
                raise
        return "late"

    slow = StructuredTool.from_function(coroutine=get_slow, name="get_slow")
    policy = ToolPolicy(timeout=0.05, retry=RetryPolicy(max_attempts=1))
    tool = ResilientTool.wrap(slow, policy=policy)

    async def main() -> Any:
        answer = json.loads(await tool.ainvoke({"x": 1}))
        await asyncio.sleep(0.01)  # the tool hears of it on the next turn of the loop
        return answer

    answer = asyncio.run(main())
    assert answer["error"] == "timeout"
    assert cancels[:1] == ["first"]  # the cancellation reached the tool


def test_a_cancelled_caller_cancels_the_tool() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def get_slow(x: int) -> str:
        """Waits."""
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    node = ResilientToolNode([StructuredTool.from_function(coroutine=get_slow, name="get_slow")])
    call = {"name": "get_slow", "args": {"x": 1}, "id": "c1", "type": "tool_call"}

    async def main() -> bool:
        task = asyncio.ensure_future(
            node.ainvoke({"messages": [AIMessage("", tool_calls=[call])]}, CONFIG)
        )
        await asyncio.wait_for(started.wait(), 30)  # the tool runs (however slow the machine)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(cancelled.wait(), 5)
        return cancelled.is_set()

    assert asyncio.run(main())


def test_a_healthy_answer_is_the_tools_own_message() -> None:
    node = ResilientToolNode([fast_tool()])
    out = asyncio.run(node.ainvoke(message(7), CONFIG))
    answer = out["messages"][0]
    assert isinstance(answer, ToolMessage) and answer.content == "value 7"
    assert answer.response_metadata == {}
