"""The async path never blocks the event loop on a shared store.

A LangGraph server runs many graphs on one event loop: the breaker, dedup and cache
operations of an async call reach the store off the loop, so a slow store stalls only
the call that waits for it, never the other coroutines.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import Op, Result
from langgraph.store.memory import InMemoryStore

from langchain_resilient_tools import (
    BreakerPolicy,
    ResilientTool,
    ResilientToolNode,
    ResilientToolsState,
    ToolPolicy,
)
from langchain_resilient_tools.testing import tool_call
from tests.tools import CALLS, ok_tool

POLICY = ToolPolicy(
    breaker=BreakerPolicy(failure_threshold=3, recovery_time=30),
    cache_ttl_s=60,
    stale_max_age_s=600,
)


class GatedStore(InMemoryStore):
    """An in-memory store whose every operation waits until `gate` is open (a store
    that is slow until something else on the event loop has run)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.waited_in: set[str] = set()
        self.timed_out = False

    def _wait(self) -> None:
        self.waited_in.add(threading.current_thread().name)
        if not self.gate.wait(10):  # the loop was blocked: nothing could open the gate
            self.timed_out = True

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        self._wait()
        return super().batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self._wait()
        return super().batch(ops)


async def _with_opener(store: GatedStore, work: Any) -> Any:
    """Run `work` while another coroutine on the same loop opens the store's gate."""

    async def opener() -> None:
        await asyncio.sleep(0)  # runs only when the loop is free
        store.gate.set()

    result, _ = await asyncio.gather(work, opener())
    return result


def test_the_node_reaches_a_slow_store_off_the_event_loop() -> None:
    store = GatedStore()
    graph = StateGraph(ResilientToolsState)
    graph.add_node("tools", ResilientToolNode([ok_tool()], policy=POLICY, store=store))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    ai = AIMessage("", tool_calls=[tool_call("get_weather", {"city": "Oslo"}, id="c1")])

    async def main() -> tuple[Any, str]:
        state = await _with_opener(store, app.ainvoke({"messages": [ai]}))
        return state, threading.current_thread().name

    state, loop_thread = asyncio.run(main())
    answer = state["messages"][-1]
    assert isinstance(answer, ToolMessage) and answer.content == "sunny in Oslo"
    assert not store.timed_out
    assert store.waited_in and loop_thread not in store.waited_in
    assert CALLS["get_weather"] == 1


def test_the_wrapper_reaches_a_slow_store_off_the_event_loop() -> None:
    store = GatedStore()
    tool = ResilientTool.wrap(ok_tool(), policy=POLICY, store=store)

    async def main() -> list[Any]:
        first = await _with_opener(store, tool.ainvoke({"city": "Oslo"}))
        again = await tool.ainvoke({"city": "Oslo"})  # a cache hit, read from the store
        return [first, again, threading.current_thread().name]

    first, again, loop_thread = asyncio.run(main())
    assert first == "sunny in Oslo" and "sunny in Oslo" in str(again)
    assert not store.timed_out
    assert store.waited_in and loop_thread not in store.waited_in
    assert CALLS["get_weather"] == 1  # the second call was answered from the store
