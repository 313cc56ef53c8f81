"""Guards users keep filing (issue 45): two tools with one name are refused; a tool that
answers with a `ToolMessage` for another call's id is answered for its own id."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool

from langchain_resilient_tools import ResilientToolNode, ResilientToolsMiddleware
from langchain_resilient_tools.core.errors import UsageError
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.conftest import Harness

# -- two tools with one name ---------------------------------------------------------


@tool("get_price")
def price_a(item: str) -> str:
    """The price of `item` (shop A)."""
    return "1 EUR"


@tool("get_price")
def price_b(item: str) -> str:
    """The price of `item` (shop B)."""
    return "2 EUR"


def get_price(item: str) -> str:
    """A plain function: the node makes it a tool named after it."""
    return "3 EUR"


@pytest.mark.parametrize("tools", [[price_a, price_b], [price_a, get_price]], ids=["tools", "fn"])
def test_the_node_refuses_two_tools_with_one_name(tools: list[Any]) -> None:
    """LangGraph's ToolNode keeps the last of them silently: the model's calls would
    reach only one of the two tools it was shown."""
    with pytest.raises(UsageError, match="ResilientToolNode: two tools are named 'get_price'"):
        ResilientToolNode(tools)


def test_the_node_takes_tools_with_distinct_names() -> None:
    node = ResilientToolNode([price_a, price_b.model_copy(update={"name": "get_price_b"})])
    assert sorted(node.tools_by_name) == ["get_price", "get_price_b"]


class AddsATool(AgentMiddleware[Any, Any, Any]):
    """Registers a tool on every model request (dynamic tools), here one whose name an
    agent's tool already has."""

    def __init__(self, extra: BaseTool) -> None:
        super().__init__()
        self.extra = extra

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(request.override(tools=[*request.tools, self.extra]))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(request.override(tools=[*request.tools, self.extra]))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_middleware_refuses_two_tools_with_one_name(mode: str) -> None:
    """`create_agent` keeps one of two same-named tools before any middleware sees them
    (documented); a tool added on a model request, beside one of its name, is refused
    before the model is called."""
    agent = create_agent(
        ScriptedChatModel(script=[AIMessage("done")]),
        tools=[price_a],
        middleware=[AddsATool(price_b), ResilientToolsMiddleware()],
    )
    payload = {"messages": [HumanMessage("how much?")]}
    with pytest.raises(UsageError, match="ResilientToolsMiddleware: two tools are named"):
        if mode == "sync":
            agent.invoke(payload)
        else:
            asyncio.run(agent.ainvoke(payload))


# -- a ToolMessage for another call's id ---------------------------------------------


def misaddressed(name: str, *, status: str = "success", fail_first: bool = False) -> BaseTool:
    """A tool that answers with a ToolMessage for the id ``"someone-else"`` (with an
    artifact); with `fail_first`, its first run raises ``ConnectionError`` (retried)."""
    left = {"n": 1 if fail_first else 0}
    lock = threading.Lock()

    def run(query: str) -> ToolMessage:
        with lock:
            if left["n"]:
                left["n"] -= 1
                raise ConnectionError("connection refused")
        return ToolMessage(
            content=f"{name}: {query}",
            tool_call_id="someone-else",
            status=status,
            artifact={"query": query},
        )

    return StructuredTool.from_function(run, name=name, description=f"The {name} tool.")


def test_a_message_for_another_id_is_answered_for_the_calls_own(harness: Harness) -> None:
    """ToolNode passes a returned ToolMessage on as it came: the call stays unanswered
    (a provider rejects the thread) and another id gets an answer nobody asked for. Each
    call gets exactly one answer, with the tool's content, status and artifact: a healthy
    call, one whose answer is an error, and one the layer retried (its answer carries
    the record)."""
    tools = [
        misaddressed("get_a"),
        misaddressed("get_b", status="error"),
        misaddressed("get_c", fail_first=True),
    ]
    calls = [tool_call(t.name, {"query": "q"}, id=f"c-{t.name}") for t in tools]
    result = harness.run(tools, calls)
    messages = result.state["messages"]
    asked = [tc["id"] for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls]
    answers = Counter(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    assert sorted(answers) == sorted(asked) and set(answers.values()) == {1}
    for t in tools:
        answer = result[f"c-{t.name}"]
        assert answer.content == f"{t.name}: q"
        assert answer.artifact == {"query": "q"}
    assert [result[f"c-{t.name}"].status for t in tools] == ["success", "error", "success"]
    assert result["c-get_a"].response_metadata == {}  # healthy: nothing added
    assert result["c-get_c"].response_metadata["resilience"]["attempts"] == 2


def test_a_message_kept_and_returned_again_answers_each_call(harness: Harness) -> None:
    """A tool that hands out the ToolMessage it made for an earlier call (a cache of its
    own): the graph gave that message an id when it kept it, so the answer of the new
    call is a new message, and the earlier call keeps its own answer."""
    kept: list[ToolMessage] = []

    def run(query: str) -> ToolMessage:
        if not kept:
            kept.append(ToolMessage(content=f"rate: {query}", tool_call_id="t1"))
        return kept[0]

    rate = StructuredTool.from_function(run, name="get_rate", description="A rate.")
    turns = [[tool_call("get_rate", {"query": q}, id=f"t{i}")] for i, q in ((1, "a"), (2, "b"))]
    last = harness.run_turns([rate], turns)[-1]
    messages = [m for m in last.state["messages"] if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in messages] == [("t1", "rate: a"), ("t2", "rate: a")]
