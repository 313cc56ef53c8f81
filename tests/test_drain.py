"""Drain: once LangGraph's `RunControl.request_drain()` is called (a server shutting
down), the layer starts no retry, hedge, breaker probe or write, and answers every call
of the running step with something that stays true after the run resumes.

Every test asks for the drain from inside the step, as a signal handler would while it
runs (before the step, LangGraph would not start it at all); ``max_concurrency=1`` makes
the call that asks run first. Testing mode makes backoff waits instant, but for the one
test marked `realtime` (a real wait that a drain must end early).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphDrained
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.runtime import RunControl

from langchain_resilient_tools import (
    BreakerPolicy,
    Hedge,
    ResilientTool,
    ResilientToolNode,
    ResilientToolsState,
    RetryPolicy,
    ToolPolicy,
    set_testing,
)
from langchain_resilient_tools.pipeline.hedge.stage import HedgeStage
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.support.answers import by_id, envelope
from tests.tools import CALLS, counted

ONE_AT_A_TIME = {"max_concurrency": 1}


def answers(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return by_id(state["messages"])


def drain_asker(control: RunControl, name: str = "get_status") -> BaseTool:
    """A read that asks for the drain while it runs (a SIGTERM arriving mid-step)."""

    def get_status(item: str) -> str:
        control.request_drain("sigterm")
        return f"{item}: ok"

    return counted(name, get_status)


def tools_node(harness: Harness, tools: list[BaseTool], policy: ToolPolicy) -> Any:
    """The node or the wrapped tools under test. `ToolNode`'s async path runs every call
    at once whatever ``max_concurrency`` says: there a wrapper runs them in order."""
    if harness.adapter == "node":
        node: Any = ResilientToolNode(tools, policy=policy)
        harness.adapters.append(node)
        return node
    lock = asyncio.Lock()

    async def in_order(request: Any, execute: Any) -> Any:
        async with lock:
            return await execute(request)

    return ToolNode([ResilientTool.wrap(t, policy=policy) for t in tools], awrap_tool_call=in_order)


def agent(harness: Harness, tools: list[BaseTool], script: list[AIMessage], policy: Any) -> Any:
    """A checkpointed agent loop (model -> tools -> model ...) with the adapter under test."""
    saver = InMemorySaver()
    if harness.adapter == "middleware":
        return harness.build(tools, policy=policy, script=script, checkpointer=saver)
    model = ScriptedChatModel(script=script)
    node = tools_node(harness, tools, policy)
    graph = StateGraph(ResilientToolsState)
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


def test_a_write_not_started_runs_once_after_the_resume(harness: Harness) -> None:
    """The step drains: the write that started (it asked for the drain) finishes and is
    journaled; the one not started is answered "not run, send it again". The run stops
    at the step's end (`GraphDrained`); resumed, the model sends that write again and it
    runs, once. Nothing is lost, nothing runs twice."""
    control = RunControl()

    def create_order(item: str) -> str:
        control.request_drain("sigterm")
        return f"order {item} placed"

    def send_email(to: str) -> str:
        return f"sent to {to}"

    tools = [counted("create_order", create_order), counted("send_email", send_email)]
    first = AIMessage(
        "",
        tool_calls=[
            tool_call("create_order", {"item": "book"}, id="c1"),
            tool_call("send_email", {"to": "ann"}, id="c2"),
        ],
    )
    again = AIMessage("", tool_calls=[tool_call("send_email", {"to": "ann"}, id="c3")])
    graph = agent(harness, tools, [first, again, AIMessage("done")], ToolPolicy())
    config: dict[str, Any] = {"configurable": {"thread_id": "t1"}, **ONE_AT_A_TIME}

    with pytest.raises(GraphDrained):
        harness.invoke(graph, {"messages": [HumanMessage("go")]}, config, control=control)
    state = graph.get_state(config).values
    got = answers(state)
    assert got["c1"].content == "order book placed"
    data = envelope(got["c2"])
    assert data["error"] == "not_run"
    assert data["retryable"] is True and data["shutting_down"] is True
    assert "was not run" in data["message"] and "Nothing was done" in data["message"]
    assert "once the run resumes" in data["suggestion"]
    assert (CALLS["create_order"], CALLS["send_email"]) == (1, 0)

    final = harness.invoke(graph, None, config, control=RunControl())
    got = answers(final)
    assert got["c3"].content == "sent to ann"
    assert final["messages"][-1].content == "done"
    assert (CALLS["create_order"], CALLS["send_email"]) == (1, 1)


class Turns:
    """One AIMessage of tool calls per turn, through the harness's adapter; a turn may
    run under a `RunControl`. A middleware agent that drains stops after the tools' step
    (`GraphDrained`) and is resumed at once, to end its turn as the others do."""

    def __init__(self, harness: Harness, tools: list[BaseTool], policy: ToolPolicy) -> None:
        self.harness, self.tools, self.policy = harness, tools, policy
        self.graph: Any = None
        self.config: dict[str, Any] = dict(ONE_AT_A_TIME)

    def plan(self, *turns: list[dict[str, Any]]) -> Turns:
        if self.harness.adapter == "middleware":
            script = [
                m for calls in turns for m in (AIMessage("", tool_calls=calls), AIMessage("done"))
            ]
            self.graph = self.harness.build(
                self.tools, policy=self.policy, script=script, checkpointer=InMemorySaver()
            )
            self.config["configurable"] = {"thread_id": "t"}
        else:
            graph = StateGraph(ResilientToolsState)
            graph.add_node("tools", tools_node(self.harness, self.tools, self.policy))
            graph.add_edge(START, "tools")
            self.graph = graph.compile()
        self.turns = list(turns)
        return self

    def run(self, control: RunControl | None = None) -> dict[str, ToolMessage]:
        calls = self.turns.pop(0)
        harness, graph, config = self.harness, self.graph, self.config
        if harness.adapter != "middleware":
            payload = {"messages": [AIMessage("", tool_calls=calls)]}
            return answers(harness.invoke(graph, payload, config, control=control))
        payload = {"messages": [HumanMessage("go")]}
        if control is None:
            return answers(harness.invoke(graph, payload, config))
        with pytest.raises(GraphDrained):
            harness.invoke(graph, payload, config, control=control)
        got = answers(graph.get_state(config).values)
        harness.invoke(graph, None, config, control=RunControl())  # resumed: "done"
        return got


def test_no_retry_starts_after_the_drain(harness: Harness, testing_mode: Any) -> None:
    """A read that fails while the run drains is not tried again, nor waited for: its
    failure is answered, saying it was not tried again and may be sent after the resume."""
    control = RunControl()

    def search_docs(query: str) -> str:
        control.request_drain()
        raise ConnectionError("upstream down")

    policy = ToolPolicy(retry=RetryPolicy(max_attempts=4, initial_delay=5.0))
    turns = Turns(harness, [counted("search_docs", search_docs)], policy)
    got = turns.plan([tool_call("search_docs", {"query": "q"}, id="c1")]).run(control)
    data = envelope(got["c1"])
    assert data["error"] == "transient_failure"
    assert data["retryable"] is True and data["shutting_down"] is True
    assert "not tried again" in data["message"] and "shutting down" in data["message"]
    assert CALLS["search_docs"] == 1
    assert testing_mode.sleeps == []  # no backoff wait either


def test_no_breaker_probe_after_the_drain(harness: Harness) -> None:
    """A circuit that is due for its half-open probe is not probed while the run
    drains: the call is answered "not run", the circuit stays half-open, and the next
    run probes."""
    clock = FakeClock()
    healthy = threading.Event()
    control = RunControl()

    def fetch(url: str) -> str:
        if not healthy.is_set():
            raise ConnectionError("down")
        return "page"

    policy = ToolPolicy(
        retry=None, breaker=BreakerPolicy(failure_threshold=1, recovery_time=5), clock=clock
    )
    turns = Turns(harness, [drain_asker(control), counted("fetch", fetch)], policy).plan(
        [tool_call("fetch", {"url": "u"}, id="f0")],
        [
            tool_call("get_status", {"item": "x"}, id="s1"),
            tool_call("fetch", {"url": "u"}, id="f1"),
        ],
        [tool_call("fetch", {"url": "u"}, id="f2")],
    )
    assert envelope(turns.run()["f0"])["error"] == "transient_failure"  # it opens
    clock.advance(10)  # past recovery_time: the next call is the probe
    healthy.set()
    data = envelope(turns.run(control)["f1"])
    assert data["error"] == "not_run" and data["retryable"] is True
    assert data["shutting_down"] is True and "was not run" in data["message"]
    assert CALLS["fetch"] == 1  # the failure that opened it; no probe
    assert turns.run()["f2"].content == "page"  # the probe, in a run that is not draining
    assert CALLS["fetch"] == 2


def test_no_hedge_after_the_drain(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow read whose hedge comes due after the drain was asked for gets no hedge:
    the attempt running finishes and answers."""
    clock = FakeClock()
    release = harness.hang_event()
    control = RunControl()
    may_hedge = HedgeStage._may_hedge
    decided: list[bool] = []

    def spy(self: HedgeStage, call: Any) -> bool:
        ok = may_hedge(self, call)
        decided.append(ok)
        release.set()  # the first attempt may finish now
        return ok

    monkeypatch.setattr(HedgeStage, "_may_hedge", spy)

    def search_docs(query: str) -> str:
        control.request_drain()
        clock.advance(10)  # far past the hedge delay
        release.wait(30)
        return f"results for {query}"

    policy = ToolPolicy(hedge=Hedge(delay=0.05), clock=clock)
    turns = Turns(harness, [counted("search_docs", search_docs)], policy)
    got = turns.plan([tool_call("search_docs", {"query": "q"}, id="c1")]).run(control)
    assert got["c1"].content == "results for q"
    assert decided and not any(decided)  # asked, and refused
    assert CALLS["search_docs"] == 1


@pytest.mark.realtime
def test_a_backoff_wait_ends_when_the_drain_is_asked() -> None:
    """A read waiting 30 s before its next attempt is answered as soon as a sibling call
    asks for the drain (the wait looks every 0.1 s), not after the wait."""
    control = RunControl()

    def search_docs(query: str) -> str:
        raise ConnectionError("upstream down")

    def get_status(item: str) -> str:
        time.sleep(0.3)  # the read is in its backoff wait by now
        control.request_drain()
        return "ok"

    node = ResilientToolNode(
        [counted("search_docs", search_docs), counted("get_status", get_status)],
        policy=ToolPolicy(
            retry=RetryPolicy(max_attempts=3, initial_delay=30.0, max_delay=30.0, jitter=0)
        ),
    )
    graph = StateGraph(ResilientToolsState)
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    calls = [
        tool_call("search_docs", {"query": "q"}, id="c1"),
        tool_call("get_status", {"item": "x"}, id="c2"),
    ]
    with set_testing(False):
        began = time.monotonic()
        state = graph.compile().invoke(
            {"messages": [AIMessage("", tool_calls=calls)]}, control=control
        )
        took = time.monotonic() - began
    data = envelope(answers(state)["c1"])
    assert data["shutting_down"] is True and "not tried again" in data["message"]
    assert answers(state)["c2"].content == "ok"
    assert CALLS["search_docs"] == 1
    assert took < 10.0  # not the 30 s wait
