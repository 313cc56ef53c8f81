"""Sync node steps with several calls: stages on a private loop of the calling thread,
tools on the pipeline's workers; threads where a loop already runs in the thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState
from langgraph.types import Command, interrupt

from langchain_resilient_tools import ResilientToolNode, ToolPolicy
from langchain_resilient_tools.runtime.steploop import step_loop
from langchain_resilient_tools.testing import tool_call
from tests.support.graphs import tools_graph


def graph_with(node: Any, **compile_kwargs: Any) -> Any:
    return tools_graph(node, MessagesState, **compile_kwargs)


def node_seeing_threads() -> tuple[ResilientToolNode, list[str], list[str]]:
    """A node whose result check records the thread the stages run on, and whose tool
    records the thread it runs on."""
    stage_threads: list[str] = []
    tool_threads: list[str] = []

    @tool
    def get_item(i: int) -> str:
        """Get an item."""
        tool_threads.append(threading.current_thread().name)
        return f"item {i}"

    def check(value: Any) -> str | None:
        stage_threads.append(threading.current_thread().name)
        return None

    node = ResilientToolNode([get_item], policy=ToolPolicy(result_checks=[check]))
    return node, stage_threads, tool_threads


def calls(n: int) -> list[Any]:
    return [tool_call("get_item", {"i": i}, id=f"c{i}") for i in range(n)]


def answers(out: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]


def test_stages_run_on_the_calling_thread_and_tools_on_workers() -> None:
    node, stage_threads, tool_threads = node_seeing_threads()
    out = graph_with(node).invoke({"messages": [AIMessage("", tool_calls=calls(4))]})
    assert answers(out) == [f"item {i}" for i in range(4)]
    assert set(stage_threads) == {threading.current_thread().name}
    assert all(name.startswith("lrt-tool") for name in tool_threads)


def test_the_loop_is_reused_by_later_steps() -> None:
    node, _, _ = node_seeing_threads()
    first = step_loop()
    graph_with(node).invoke({"messages": [AIMessage("", tool_calls=calls(3))]})
    assert step_loop() is first
    assert first is not None and not first.is_closed()


def test_with_a_loop_running_in_the_thread_the_calls_go_to_threads() -> None:
    """A Jupyter cell calling ``graph.invoke`` runs inside the kernel's event loop."""
    node, stage_threads, _ = node_seeing_threads()
    graph = graph_with(node)

    async def cell() -> dict[str, Any]:
        assert step_loop() is None
        return graph.invoke({"messages": [AIMessage("", tool_calls=calls(4))]})

    out = asyncio.run(cell())
    assert answers(out) == [f"item {i}" for i in range(4)]
    assert any(name.startswith("lrt-dispatch") for name in stage_threads)


def test_an_interrupt_among_several_calls_waits_for_its_siblings_and_resumes() -> None:
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        ran.append(city)
        return f"sunny in {city}"

    @tool
    def book_room(room: str) -> str:
        """Book a room after a human approves."""
        answer = interrupt({"approve": room})
        return f"booked {room}: {answer}"

    graph = graph_with(ResilientToolNode([get_weather, book_room]), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "steploop-interrupt"}}
    ai = AIMessage(
        "",
        tool_calls=[
            tool_call("get_weather", {"city": "Oslo"}, id="w1"),
            tool_call("book_room", {"room": "r1"}, id="b1"),
            tool_call("get_weather", {"city": "Rome"}, id="w2"),
        ],
    )
    first = graph.invoke({"messages": [ai]}, config)
    assert first["__interrupt__"][0].value == {"approve": "r1"}
    assert sorted(ran) == ["Oslo", "Rome"]
    resumed = graph.invoke(Command(resume="yes"), config)
    by_id = {m.tool_call_id: m.content for m in resumed["messages"] if isinstance(m, ToolMessage)}
    assert by_id == {"w1": "sunny in Oslo", "b1": "booked r1: yes", "w2": "sunny in Rome"}
    assert sorted(ran) == ["Oslo", "Rome"]  # the resumed step did not run them again


def test_a_step_cut_short_drops_its_loop_and_the_next_step_runs() -> None:
    @tool
    def get_item(i: int) -> str:
        """Get an item."""
        if i == 1:
            raise KeyboardInterrupt
        return f"item {i}"

    graph = graph_with(ResilientToolNode([get_item]))
    before = step_loop()
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"messages": [AIMessage("", tool_calls=calls(3))]})
    assert before is not None and before.is_closed()
    after = step_loop()
    assert after is not None and after is not before
    out = graph.invoke({"messages": [AIMessage("", tool_calls=[calls(3)[0], calls(3)[2]])]})
    assert answers(out) == ["item 0", "item 2"]
