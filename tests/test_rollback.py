"""Rollback in real agent loops (node and middleware), its bound, and graph-state records."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition

from langchain_resilient_tools import ResilientToolNode, ResilientToolsState, ToolPolicy
from langchain_resilient_tools.adapters.rollback import rollback_update
from langchain_resilient_tools.checks import empty_result
from langchain_resilient_tools.core.policy import PolicyResolver
from langchain_resilient_tools.pipeline import Pipeline
from langchain_resilient_tools.pipeline.checks import ROLLBACK_META
from langchain_resilient_tools.routing import recent_tool_errors, route_on_tool_errors
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.conftest import Harness
from tests.tools import CALLS, counted

POLICY = ToolPolicy(result_checks=[empty_result], on_low_quality="rollback")
CONFIG: dict[str, Any] = {"configurable": {"thread_id": "t"}}


def search(results: dict[str, Any] | None = None) -> Any:
    table = results or {}
    return counted("search_web", lambda query: table.get(query, []))


def asks(*queries: str) -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[tool_call("search_web", {"query": q}, id=f"id-{q}")])
        for q in queries
    ]


def build(
    kind: str, tools: list[Any], script: list[AIMessage], policy: ToolPolicy, state: Any = None
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(script=script)
    if kind == "middleware":
        from langchain.agents import create_agent

        from langchain_resilient_tools import ResilientToolsMiddleware

        agent = create_agent(
            model,
            tools=tools,
            middleware=[ResilientToolsMiddleware(policy=policy)],
            checkpointer=InMemorySaver(),
        )
        return agent, model
    graph = StateGraph(state or ResilientToolsState)
    graph.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    graph.add_node("tools", ResilientToolNode(tools, policy=policy))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver()), model


def answered_once(messages: list[Any]) -> None:
    answers = Counter(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    asked = [tc["id"] for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls]
    assert sorted(asked) == sorted(answers)
    assert set(answers.values()) <= {1}


LOOPS = [(k, m) for k in ("node", "middleware") for m in ("sync", "async")]


@pytest.mark.parametrize(("kind", "mode"), LOOPS, ids=[f"{k}-{m}" for k, m in LOOPS])
def test_rollback_is_bounded(kind: str, mode: str) -> None:
    script = [*asks("a", "b", "c"), AIMessage("I could not find anything.")]
    graph, model = build(kind, [search()], script, POLICY)
    state = Harness(kind, mode).invoke(graph, {"messages": [HumanMessage("find it")]}, CONFIG)
    messages = state["messages"]
    assert CALLS["search_web"] == 3
    # The second model call saw a clean context: no trace of the discarded turn but the note.
    second = model.seen[1]
    assert not any(isinstance(m, (ToolMessage, AIMessage)) for m in second)
    assert isinstance(second[-1], HumanMessage) and "[Tool note]" in second[-1].text
    assert '"query": "a"' in second[-1].text
    # Two rollbacks, then the third low-quality result stays as feedback.
    assert state["tool_ledger"]["rollbacks"] == 2
    remaining = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in remaining] == ["id-c"]
    assert json.loads(str(remaining[0].content))["error"] == "low_quality_result"
    assert ROLLBACK_META not in remaining[0].response_metadata or kind == "middleware"
    assert [r["tool_call_id"] for r in state["tool_errors"]] == ["id-a", "id-b", "id-c"]
    assert messages[-1].text == "I could not find anything."
    answered_once(messages)


@pytest.mark.parametrize(("kind", "mode"), LOOPS, ids=[f"{k}-{m}" for k, m in LOOPS])
def test_good_step_resets_the_count(kind: str, mode: str) -> None:
    script = [*asks("a", "good", "b"), AIMessage("done")]
    graph, _ = build(kind, [search({"good": "found"})], script, POLICY)
    state = Harness(kind, mode).invoke(graph, {"messages": [HumanMessage("go")]}, CONFIG)
    # a: rolled back (1), good: reset (0), b: rolled back again (1)
    assert state["tool_ledger"]["rollbacks"] == 1
    kept = [m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)]
    assert kept == ["id-good"]
    answered_once(state["messages"])


def test_zero_rollbacks_means_feedback() -> None:
    policy = POLICY.model_copy(
        update={"results": POLICY.results.model_copy(update={"max_rollbacks": 0})}
    )
    graph, _ = build("node", [search()], [*asks("a"), AIMessage("done")], policy)
    state = graph.invoke({"messages": [HumanMessage("go")]}, CONFIG)
    kept = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in kept] == ["id-a"]


def test_siblings_are_rolled_back_with_the_turn() -> None:
    turn = AIMessage(
        "",
        tool_calls=[
            tool_call("search_web", {"query": "empty"}, id="x"),
            tool_call("search_web", {"query": "full"}, id="y"),
        ],
    )
    graph, _ = build("node", [search({"full": "data"})], [turn, AIMessage("done")], POLICY)
    state = graph.invoke({"messages": [HumanMessage("go")]}, CONFIG)
    assert not any(isinstance(m, ToolMessage) for m in state["messages"])
    answered_once(state["messages"])
    assert [r["tool_call_id"] for r in state["tool_errors"]] == ["x"]


def test_without_a_ledger_the_node_counts_in_memory() -> None:
    script = [*asks("a", "b", "c"), AIMessage("done")]
    graph, _ = build("node", [search()], script, POLICY, state=MessagesState)
    state = graph.invoke({"messages": [HumanMessage("go")]}, CONFIG)
    kept = [m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)]
    assert kept == ["id-c"]  # bounded at 2 rollbacks, counted per thread in memory
    assert "tool_ledger" not in state
    answered_once(state["messages"])


def test_rollback_update_unit() -> None:
    ai = AIMessage("", tool_calls=[tool_call("s", {}, id="1")], id="ai-1")
    mark = {"guidance": "note", "max": 2}
    marked = ToolMessage("x", tool_call_id="1", id="tm-1", response_metadata={ROLLBACK_META: mark})
    plain = ToolMessage("x", tool_call_id="1", id="tm-1")
    history = [HumanMessage("q", id="h"), ai, marked]
    step = Pipeline(PolicyResolver()).loose_step

    def undo(history: list[Any], answer: ToolMessage, count: int) -> Any:
        return rollback_update(history, [answer], step.close([answer], keep=True), count)

    update, count = undo(history, marked, 0)
    assert count == 1 and update is not None
    assert [getattr(m, "id", None) for m in update[:2]] == ["ai-1", "tm-1"]
    assert update[-1].text == "note"
    assert undo(history, marked, 2) == (None, 2)
    assert undo(history, plain, 2) == (None, 0)
    no_id = [AIMessage("", tool_calls=[tool_call("s", {}, id="1")])]
    assert undo(no_id, marked, 0) == (None, 0)


# -- routing on recent tool errors ------------------------------------------------------


def test_route_on_tool_errors() -> None:
    old = AIMessage("", tool_calls=[tool_call("get_a", {}, id="old")])
    new = AIMessage(
        "", tool_calls=[tool_call("get_b", {}, id="n1"), tool_call("get_c", {}, id="n2")]
    )
    errors = [
        {"tool": "get_a", "tool_call_id": "old", "error": "timeout"},
        {"tool": "get_b", "tool_call_id": "n1", "error": "circuit_open"},
    ]
    state = {"messages": [old, new], "tool_errors": errors}
    assert [r["tool_call_id"] for r in recent_tool_errors(state)] == ["n1"]
    assert route_on_tool_errors("help", "agent")(state) == "help"
    assert route_on_tool_errors("help", "agent", errors=["timeout"])(state) == "agent"
    assert route_on_tool_errors("help", "agent", tools=["get_c"])(state) == "agent"
    assert route_on_tool_errors("help", "agent", min_errors=2)(state) == "agent"
    assert route_on_tool_errors("help", "agent")({"messages": [old]}) == "agent"
    with pytest.raises(ValueError):
        route_on_tool_errors("help", "agent", errors=["no_such_error"])


def test_route_in_a_compiled_graph() -> None:
    tool = counted("get_data", lambda query: (_ for _ in ()).throw(ConnectionError("down")))
    graph = StateGraph(ResilientToolsState)
    graph.add_node("tools", ResilientToolNode([tool]))
    graph.add_node("apologise", lambda s: {"messages": [AIMessage("The service is down.")]})
    graph.add_node("agent", lambda s: {"messages": [AIMessage("ok")]})
    graph.add_edge(START, "tools")
    graph.add_conditional_edges(
        "tools",
        route_on_tool_errors("apologise", "agent", errors=["transient_failure"]),
        ["apologise", "agent"],
    )
    ai = AIMessage("", tool_calls=[tool_call("get_data", {"query": "q"}, id="1")])
    state = graph.compile().invoke({"messages": [ai]})
    assert state["messages"][-1].text == "The service is down."
