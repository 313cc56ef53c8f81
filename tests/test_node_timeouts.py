"""Layered timeouts with LangGraph's own: a node timed with `TimeoutPolicy` (on
``add_node`` or on one ``Send``) answers every call before LangGraph would cancel it,
and a live call keeps a node with an ``idle_timeout`` from being taken for idle.

LangGraph times async nodes only, so these run `ainvoke`. The first tests pin how the
node's timeout is found on the installed LangGraph (`runtime.graphnode`: no public API
hands it to the node) and use testing mode with a fake clock; the ones marked
`realtime` let LangGraph's own watchdog run, with bounds of 2 s or more, since only its
real clock proves the node was not cancelled.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from langgraph.types import Send, TimeoutPolicy

from langchain_resilient_tools import (
    ResilientTool,
    ResilientToolNode,
    ResilientToolsState,
    RetryPolicy,
    ToolPolicy,
    set_testing,
)
from langchain_resilient_tools.runtime.graphnode import NodeRun, node_run
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.support.answers import by_id
from tests.tools import CALLS, counted


def run(graph: Any, calls: list[dict[str, Any]]) -> dict[str, ToolMessage]:
    state = asyncio.run(graph.ainvoke({"messages": [AIMessage("", tool_calls=calls)]}))
    return by_id(state["messages"])


def in_graph(node: Any, timeout: TimeoutPolicy | None, *, send: bool = False) -> Any:
    """START -> tools -> END, the tools node timed by `timeout`, or (`send`) reached by a
    ``Send`` that carries it (the node itself then has none)."""
    graph = StateGraph(ResilientToolsState)
    if send:
        graph.add_node("tools", node)
        graph.add_conditional_edges(
            START, lambda state: [Send("tools", state, timeout=timeout)], ["tools"]
        )
    else:
        graph.add_node("tools", node, timeout=timeout)
        graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def adapter(kind: str, tools: list[BaseTool], policy: ToolPolicy) -> Any:
    if kind == "node":
        return ResilientToolNode(tools, policy=policy)
    return ToolNode([ResilientTool.wrap(t, policy=policy) for t in tools], handle_tool_errors=True)


# -- how the node's timeout is found ---------------------------------------------------


def _seen(timeout: TimeoutPolicy | None, *, send: TimeoutPolicy | None = None) -> list[Any]:
    """What `node_run` finds in a node timed by `timeout` (reached by a ``Send`` with
    `send`, when given), and the node's heartbeat."""
    found: list[Any] = []

    async def probe(state: dict[str, Any], config: RunnableConfig, runtime: Runtime) -> Any:
        found.extend([node_run(config), runtime.heartbeat])
        return {}

    graph = StateGraph(ResilientToolsState)
    graph.add_node("probe", probe, timeout=timeout)
    if send is not None:
        graph.add_conditional_edges(START, lambda s: [Send("probe", s, timeout=send)], ["probe"])
    else:
        graph.add_edge(START, "probe")
    asyncio.run(graph.compile().ainvoke({"messages": []}))
    return found


def test_the_nodes_timeout_is_found() -> None:
    node, beat = _seen(TimeoutPolicy(run_timeout=30, idle_timeout=5, refresh_on="heartbeat"))
    assert isinstance(node, NodeRun)
    assert (node.run_timeout, node.idle_timeout) == (30.0, 5.0)
    assert node.heartbeat is beat  # LangGraph's own, refreshing this attempt's idle clock
    assert node.ends_at is not None  # 30 s after the attempt started
    assert node.answer_by == pytest.approx(node.ends_at - 1.0)  # a tenth, at most 1 s


def test_a_send_timeout_replaces_the_nodes() -> None:
    node, _ = _seen(TimeoutPolicy(idle_timeout=5), send=TimeoutPolicy(run_timeout=3))
    assert (node.run_timeout, node.idle_timeout, node.heartbeat) == (3.0, None, None)
    assert node.answer_by == pytest.approx(node.ends_at - 0.3)


def test_no_timeout_no_node_and_no_heartbeat() -> None:
    assert _seen(None)[0] is None
    node, _ = _seen(TimeoutPolicy(run_timeout=3))
    assert node.heartbeat is None  # no idle timeout: the layer never calls it
    assert node_run(None) is None and node_run({"configurable": {}}) is None


# -- the node's run timeout caps every call (testing mode, fake clock) -------------------


@pytest.mark.parametrize("kind", ["node", "tool"])
@pytest.mark.parametrize("send", [False, True], ids=["add_node", "Send"])
def test_retries_stop_within_the_nodes_run_timeout(
    kind: str, send: bool, testing_mode: Any
) -> None:
    """Backoff waits are made within what the node's 3 s leave (less the 0.3 s to
    answer); once the next wait would take that, the call is answered with its last
    failure, saying it was the step's time limit. The tool moves the fake clock 1 s per
    attempt; the waits are testing mode's (they do not move it)."""
    clock = FakeClock()

    def search_docs(query: str) -> str:
        clock.advance(1.0)
        raise ConnectionError("upstream down")

    policy = ToolPolicy(
        retry=RetryPolicy(max_attempts=10, initial_delay=0.5, max_delay=5.0, jitter=0),
        clock=clock,
    )
    node = adapter(kind, [counted("search_docs", search_docs)], policy)
    graph = in_graph(node, TimeoutPolicy(run_timeout=3), send=send)
    answer = run(graph, [tool_call("search_docs", {"query": "q"}, id="c1")])["c1"]
    data = json.loads(str(answer.content))
    assert data["error"] == "transient_failure"
    assert data["step_time_limit_s"] == 3.0
    assert "the graph gives its tool step 3 s" in data["message"]
    # 1.7 s left after the first attempt: the 0.5 s wait fits; 0.7 s after the second:
    # the 1 s wait would take it all, so no third attempt is made to answer ``timeout``.
    assert CALLS["search_docs"] == 2
    assert testing_mode.sleeps == [0.5]


# -- LangGraph's own watchdog (real time) ----------------------------------------------


async def down(query: str) -> str:
    raise ConnectionError("upstream down")


async def get_time(zone: str) -> str:
    return f"noon in {zone}"


@pytest.mark.realtime
@pytest.mark.parametrize(
    ("kind", "send"), [("node", False), ("tool", False), ("node", True)], ids=str
)
def test_every_call_is_answered_before_the_node_times_out(kind: str, send: bool) -> None:
    """A read whose backoff (1 s, 2 s, 4 s ...) outlasts the node's 2 s run timeout is
    answered in time, beside a healthy call: no `NodeTimeoutError`, no answer lost."""
    tools = [
        counted("search_docs", down, coroutine=down),
        counted("get_time", get_time, coroutine=get_time),
    ]
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=6, initial_delay=1.0, jitter=0))
    graph = in_graph(adapter(kind, tools, policy), TimeoutPolicy(run_timeout=2), send=send)
    calls = [
        tool_call("search_docs", {"query": "q"}, id="c1"),
        tool_call("get_time", {"zone": "utc"}, id="c2"),
    ]
    with set_testing(False):
        got = run(graph, calls)  # LangGraph's watchdog would raise NodeTimeoutError
    data = json.loads(str(got["c1"].content))
    assert data["retryable"] is True and data["step_time_limit_s"] == 2.0
    assert data["waited_s"] < 2.0
    assert got["c2"].content == "noon in utc"


@pytest.mark.realtime
@pytest.mark.parametrize("refresh_on", ["auto", "heartbeat"])
def test_a_live_call_keeps_an_idle_timed_node_alive(refresh_on: str) -> None:
    """A read fails, waits 1.2 s, then takes 1.2 s to answer: twice longer than the
    node's 1 s idle timeout with no sign of progress LangGraph sees itself. Its
    heartbeats keep the node alive, and the call answers."""
    attempts: list[int] = []

    async def search_docs(query: str) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("upstream down")
        await asyncio.sleep(1.2)
        return f"results for {query}"

    policy = ToolPolicy(
        timeout=5, retry=RetryPolicy(max_attempts=2, initial_delay=1.2, max_delay=1.2, jitter=0)
    )
    tool = counted("search_docs", search_docs, coroutine=search_docs)
    timeout = TimeoutPolicy(idle_timeout=1.0, refresh_on=refresh_on)  # type: ignore[arg-type]
    graph = in_graph(ResilientToolNode([tool], policy=policy), timeout)
    with set_testing(False):
        got = run(graph, [tool_call("search_docs", {"query": "q"}, id="c1")])
    assert got["c1"].content == "results for q"
    assert len(attempts) == 2
