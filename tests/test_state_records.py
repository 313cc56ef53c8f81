"""Error records and graph state: a state without ``tool_errors`` is warned about once."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_resilient_tools import ResilientToolNode
from langchain_resilient_tools.state.graph import append_records
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.tools import failing_tool

LOGGER = "langchain_resilient_tools"


def _graph(state: type[Any], **node_kwargs: Any) -> Any:
    graph = StateGraph(state)
    graph.add_node(
        "tools", ResilientToolNode([failing_tool("get_x", ValueError("no"))], **node_kwargs)
    )
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


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
