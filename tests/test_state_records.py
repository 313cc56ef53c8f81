"""Error records and graph state: a state without ``tool_errors`` is warned about once."""

from __future__ import annotations

import asyncio
import logging
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NotRequired

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps

from langchain_resilient_tools import ResilientToolNode, ResilientToolsState
from langchain_resilient_tools.state.graph import ERRORS_MAX_RECORDS, append_records
from langchain_resilient_tools.testing import ScriptedChatModel, invalid_call, tool_call
from tests.support.graphs import tools_graph
from tests.tools import failing_tool, ok_tool

LOGGER = "langchain_resilient_tools"


def _graph(state: type[Any], **node_kwargs: Any) -> Any:
    return tools_graph(
        ResilientToolNode([failing_tool("get_x", ValueError("no"))], **node_kwargs), state
    )


def _turn(i: int) -> dict[str, Any]:
    return {
        "messages": [AIMessage("", tool_calls=[tool_call("get_x", {"query": "q"}, id=f"c{i}")])]
    }


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "no 'tool_errors' key" in r.getMessage()]


def test_a_state_without_tool_errors_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    graph = _graph(MessagesState)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for i in range(3):
            state = graph.invoke(_turn(i))
            assert isinstance(state["messages"][-1], ToolMessage)  # the model still gets it
    (text,) = _warnings(caplog)
    assert "ResilientToolsState" in text and "append_records" in text
    assert "errors_key=None" in text


def test_the_documented_one_line_fix_keeps_the_records(caplog: pytest.LogCaptureFixture) -> None:
    class State(MessagesState):
        tool_errors: Annotated[list[dict[str, Any]], append_records]  # the one line

    with caplog.at_level(logging.WARNING, logger=LOGGER):
        state = _graph(State).invoke(_turn(0))
    assert [r["error"] for r in state["tool_errors"]] == ["tool_error"]
    assert _warnings(caplog) == []


def test_errors_key_none_silences_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        _graph(MessagesState, errors_key=None).invoke(_turn(0))
    assert _warnings(caplog) == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # create_react_agent is deprecated
def test_create_react_agent_default_state_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from langgraph.prebuilt import create_react_agent

    ai = _turn(0)["messages"][0]
    model = ScriptedChatModel(script=[ai, AIMessage("done")])
    node = ResilientToolNode([failing_tool("get_x", ValueError("no"))])
    agent = create_react_agent(model, node)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        agent.invoke({"messages": [HumanMessage("go")]})
    assert len(_warnings(caplog)) == 1


# -- the node inside create_react_agent (v1: one step; v2: each call sent on its own) and
# -- create_agent: the records are kept in the state the graph declares.


class ReactState(ResilientToolsState):
    remaining_steps: NotRequired[RemainingSteps]  # create_react_agent requires it


def _react_agent(
    version: str, schema: Any, tools: list[Any], args: dict[str, Any] | None = None
) -> Any:
    from langgraph.prebuilt import create_react_agent

    args = args or {"query": "q"}
    calls = [tool_call(t.name, args, id=f"c{i}") for i, t in enumerate(tools)]
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), AIMessage("done")])
    with warnings.catch_warnings():  # create_react_agent is deprecated in LangGraph 1.0
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(
            model, ResilientToolNode(tools), state_schema=schema, version=version
        )


def _invoke(agent: Any, mode: str, payload: Any) -> Any:
    if mode == "sync":
        return agent.invoke(payload)
    return asyncio.run(agent.ainvoke(payload))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_create_react_agent_keeps_the_records(
    version: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [failing_tool("get_x", ValueError("no")), failing_tool("get_y", ValueError("no"))]
    agent = _react_agent(version, ReactState, tools)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        state = _invoke(agent, mode, {"messages": [HumanMessage("go")]})
    assert sorted(r["tool_call_id"] for r in state["tool_errors"]) == ["c0", "c1"]
    assert _warnings(caplog) == []


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_create_react_agent_answers_the_malformed_calls_once(version: str, mode: str) -> None:
    """v2 sends only the well-formed calls, each with the state: the model's malformed
    call is answered (once, with the message's first call) and recorded."""
    from langgraph.prebuilt import create_react_agent

    calls = [tool_call("get_weather", {"city": c}, id=f"c{i}") for i, c in enumerate("AB")]
    bad = [invalid_call("get_weather", '{"city": "Par', id="bad")]
    ai = AIMessage("", tool_calls=calls, invalid_tool_calls=bad)
    model = ScriptedChatModel(script=[ai, AIMessage("done")])
    with warnings.catch_warnings():  # create_react_agent is deprecated in LangGraph 1.0
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(
            model, ResilientToolNode([ok_tool()]), state_schema=ReactState, version=version
        )
    state = _invoke(agent, mode, {"messages": [HumanMessage("go")]})
    answered = [m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)]
    assert sorted(answered) == ["bad", "c0", "c1"]
    assert [r["tool_call_id"] for r in state["tool_errors"]] == ["bad"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_create_react_agent_keeps_the_dedup_ledger(version: str, mode: str) -> None:
    state = _invoke(
        _react_agent(version, ReactState, [ok_tool("get_x")], {"city": "Oslo"}),
        mode,
        {"messages": [HumanMessage("go")]},
    )
    (entry,) = state["tool_ledger"]["dedup"].values()
    assert entry["call_id"] == "c0" and entry["status"] == "ok"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_create_react_agent_default_state_is_warned_about_per_version(
    version: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    from langgraph.prebuilt.chat_agent_executor import AgentState

    agent = _react_agent(version, AgentState, [failing_tool("get_x", ValueError("no"))])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        state = _invoke(agent, mode, {"messages": [HumanMessage("go")]})
    assert "tool_errors" not in state and len(_warnings(caplog)) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("own_schema", [False, True])
def test_create_agent_keeps_the_records(own_schema: bool, mode: str) -> None:
    from langchain.agents import AgentState, create_agent

    from langchain_resilient_tools import ResilientToolsMiddleware

    class MyState(AgentState[Any]):
        user_id: NotRequired[str]

    calls = [tool_call("get_x", {"query": "q"}, id="c0")]
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), AIMessage("done")])
    kwargs: dict[str, Any] = {"state_schema": MyState} if own_schema else {}
    agent = create_agent(
        model,
        tools=[failing_tool("get_x", ValueError("no"))],
        middleware=[ResilientToolsMiddleware()],
        **kwargs,
    )
    state = _invoke(agent, mode, {"messages": [HumanMessage("go")]})
    assert [r["tool_call_id"] for r in state["tool_errors"]] == ["c0"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dataclass_state_keeps_the_records(mode: str) -> None:
    @dataclass
    class State:
        messages: Annotated[list[AnyMessage], add_messages]
        tool_errors: Annotated[list[dict[str, Any]], append_records] = field(default_factory=list)

    state = _invoke(_graph(State), mode, _turn(0))
    assert [r["error"] for r in state["tool_errors"]] == ["tool_error"]


def _long_turn(i: int) -> dict[str, Any]:
    call = tool_call("get_x", {"query": f"q{i}"}, id=f"c{i}")
    return {"messages": [AIMessage("", tool_calls=[call])]}


def test_tool_errors_stay_bounded_over_a_long_thread() -> None:
    """500 turns with one failing call each would keep 500 records (trimming the messages
    does not trim them): the reducer keeps the newest `ERRORS_MAX_RECORDS`, and the first
    one kept counts those dropped. A real graph loops model -> tools, one failing call a
    turn, in one run."""
    turns = ERRORS_MAX_RECORDS + 30

    def asked(state: dict[str, Any]) -> int:
        return sum(isinstance(m, AIMessage) for m in state["messages"])

    def model(state: dict[str, Any]) -> dict[str, Any]:
        return _long_turn(asked(state))

    def again(state: dict[str, Any]) -> str:
        return "model" if asked(state) < turns else END

    graph = StateGraph(ResilientToolsState)
    graph.add_node("model", model)
    graph.add_node("tools", ResilientToolNode([failing_tool("get_x", ValueError("no"))]))
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_conditional_edges("tools", again, ["model", END])
    state = graph.compile().invoke({"messages": []}, {"recursion_limit": 3 * turns})
    records = state["tool_errors"]
    assert [r["tool_call_id"] for r in records] == [f"c{i}" for i in range(30, turns)]
    assert records[0]["dropped_before"] == 30
    assert all("dropped_before" not in r for r in records[1:])
    assert len([m for m in state["messages"] if isinstance(m, ToolMessage)]) == turns


@pytest.mark.parametrize("adapter", ["node", "middleware"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_adapter_keeps_the_newest_records(
    adapter: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node and the middleware's agent state share the reducer (a wrapped tool keeps
    no records: it is no graph node); the count of dropped records adds up over cuts."""
    from tests.conftest import Harness

    monkeypatch.setattr("langchain_resilient_tools.state.graph.ERRORS_MAX_RECORDS", 3)
    harness = Harness(adapter, mode)
    try:
        turns = [[tool_call("get_x", {"query": f"q{i}"}, id=f"c{i}")] for i in range(6)]
        results = harness.run_turns([failing_tool("get_x", ValueError("no"))], turns)
    finally:
        harness.close()
    records = results[-1].tool_errors
    assert [r["tool_call_id"] for r in records] == ["c3", "c4", "c5"]
    assert [r.get("dropped_before") for r in records] == [3, None, None]
    assert results[3].tool_errors[0]["dropped_before"] == 1  # first cut: one dropped


def test_the_dropped_count_adds_up_and_no_kept_record_is_changed() -> None:
    """Many records in one update; a record already kept (in a checkpoint) is copied,
    never changed in place."""
    first = [{"tool_call_id": f"a{i}"} for i in range(ERRORS_MAX_RECORDS)]
    kept = append_records(first, [{"tool_call_id": "b0"}, {"tool_call_id": "b1"}])
    assert kept[0] == {"tool_call_id": "a2", "dropped_before": 2}
    assert first[2] == {"tool_call_id": "a2"}
    many = [{"tool_call_id": f"c{i}"} for i in range(ERRORS_MAX_RECORDS + 5)]
    again = append_records(kept, many)
    assert again[0] == {"tool_call_id": "c5", "dropped_before": 2 + ERRORS_MAX_RECORDS + 5}
    assert len(again) == ERRORS_MAX_RECORDS


DOC = (Path(__file__).parent.parent / "docs" / "state-records.md").read_text()
DOC_BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")
@pytest.mark.parametrize("code", DOC_BLOCKS, ids=[f"block{i}" for i in range(len(DOC_BLOCKS))])
def test_the_documented_advice_runs_as_written(code: str) -> None:
    assert len(DOC_BLOCKS) == 3
    exec(compile(code, "docs/state-records.md", "exec", dont_inherit=True), {"__name__": "docs"})
