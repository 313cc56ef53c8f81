"""The model-side fault kit (`testing.model_faults`): each slip, the repeated write, and a
faulty model inside `create_agent` and a hand-built graph, sync and async."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import tools_condition
from pydantic import Field

from langchain_resilient_tools import (
    ResilientToolNode,
    ResilientToolsMiddleware,
    ResilientToolsState,
)
from langchain_resilient_tools.pipeline.repair.jsontext import parse_args
from langchain_resilient_tools.testing import (
    FaultyChatModel,
    ModelFaultPlan,
    ScriptedChatModel,
    Slip,
    faulty_message,
    slip_call,
    tool_call,
)

CALL = tool_call("create_order", {"order_id": "tea", "quantity": 2, "price": 2.5}, id="c1")


# -- one slip on one call


def test_camel_case_renames_snake_case_arguments() -> None:
    slipped = slip_call(CALL, Slip.CAMEL_CASE)
    assert slipped["args"] == {"orderId": "tea", "quantity": 2, "price": 2.5}
    assert CALL["args"]["order_id"] == "tea"  # pure: the original is untouched
    assert (slipped["id"], slipped["type"]) == ("c1", "tool_call")


def test_numbers_are_sent_as_text() -> None:
    call = tool_call("t", {"n": 2, "x": 2.0, "flag": True, "s": "a"}, id="1")
    assert slip_call(call, Slip.NUMBER_AS_TEXT)["args"] == {
        "n": "2", "x": "2.0", "flag": True, "s": "a",
    }  # fmt: skip


def test_an_extra_argument_is_added_under_a_free_name() -> None:
    assert slip_call(CALL, Slip.EXTRA_ARG)["args"]["note"] == "as requested"
    taken = tool_call("t", {"note": "mine"}, id="1")
    assert slip_call(taken, Slip.EXTRA_ARG)["args"] == {"note": "mine", "_note": "as requested"}


def test_json_text_becomes_an_invalid_call_with_one_repairable_defect() -> None:
    defects = set()
    for i in range(16):
        call = {**CALL, "id": f"c{i}"}
        invalid = slip_call(call, Slip.JSON_TEXT)
        assert set(invalid) == {"name", "args", "id", "error", "type"}
        assert (invalid["name"], invalid["id"], invalid["type"]) == (
            "create_order", f"c{i}", "invalid_tool_call",
        )  # fmt: skip
        raw = invalid["args"]
        with pytest.raises(ValueError):
            json.loads(raw)
        assert parse_args(raw)[0] == CALL["args"]  # every value kept
        defects.add("trailing comma" if raw.endswith(",}") else "single quotes")
    assert defects == {"trailing comma", "single quotes"}
    quoted = tool_call("t", {"q": "it's"}, id="2")  # single quotes would be ambiguous
    assert slip_call(quoted, Slip.JSON_TEXT)["args"] == '{"q": "it\'s",}'
    assert parse_args(slip_call(tool_call("t", {}, id="3"), Slip.JSON_TEXT)["args"])[0] == {}


# -- the plan


@pytest.mark.parametrize("kw", [{"p_slip": 2.0}, {"p_repeat": -1.0}, {"slips": ()}])
def test_an_invalid_plan_fails_at_construction(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ModelFaultPlan(**kw)


def test_draws_are_pure_and_near_their_probability() -> None:
    plan = ModelFaultPlan(p_slip=0.3, p_repeat=0.6, seed=3)
    slips = [plan.draw_slip(f"id{i}", "t", 0) for i in range(2000)]
    assert slips == [ModelFaultPlan(p_slip=0.3, seed=3).draw_slip(f"id{i}", "t", 0)
                     for i in range(2000)]  # fmt: skip
    assert slips != [ModelFaultPlan(p_slip=0.3, seed=4).draw_slip(f"id{i}", "t", 0)
                     for i in range(2000)]  # fmt: skip
    assert 0.26 < sum(s is not None for s in slips) / 2000 < 0.34
    assert {s for s in slips if s is not None} == set(Slip)
    assert 0.56 < sum(plan.draw_repeat(f"k{i}") for i in range(2000)) / 2000 < 0.64


# -- a whole message


def test_json_text_moves_a_call_into_invalid_tool_calls() -> None:
    message = AIMessage("", tool_calls=[CALL, tool_call("get_rate", {"currency": "USD"}, id="c2")])
    out = faulty_message(message, ModelFaultPlan(p_slip=1.0, slips=(Slip.JSON_TEXT,)))
    assert out.tool_calls == [] and [c["id"] for c in out.invalid_tool_calls] == ["c1", "c2"]
    assert message.tool_calls and not message.invalid_tool_calls  # a new message
    assert faulty_message(message, ModelFaultPlan(p_slip=0.0)) is message


def _history(status: str = "success", name: str = "create_order") -> list[BaseMessage]:
    call = tool_call(name, {"order_id": "tea"}, id="w1")
    return [
        HumanMessage("order tea"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("ordered", tool_call_id="w1", status=status),  # type: ignore[arg-type]
    ]


def test_a_successful_write_is_repeated_with_a_new_id() -> None:
    plan = ModelFaultPlan(p_slip=0.0, p_repeat=1.0, writes=frozenset({"create_order"}))
    out = faulty_message(AIMessage("Done."), plan, history=_history())
    [repeat] = out.tool_calls
    assert repeat["name"] == "create_order" and repeat["args"] == {"order_id": "tea"}
    assert repeat["id"] not in (None, "w1")
    # Not repeated: a failed write, a read, an older turn, a repeat, p_repeat=0.
    assert not faulty_message(AIMessage("x"), plan, history=_history("error")).tool_calls
    assert not faulty_message(AIMessage("x"), plan, history=_history(name="get_rate")).tool_calls
    older = [*_history(), AIMessage("Done."), HumanMessage("thanks")]
    assert not faulty_message(AIMessage("x"), plan, history=older).tool_calls
    again = [*_history(), out, ToolMessage("ordered", tool_call_id=repeat["id"])]
    assert not faulty_message(AIMessage("x"), plan, history=again).tool_calls
    quiet = ModelFaultPlan(p_slip=0.0)
    assert not faulty_message(AIMessage("x"), quiet, history=_history()).tool_calls


# -- the model, in an agent and in a graph

ORDERS: list[tuple[str, int]] = []


@tool
def create_order(order_id: str, quantity: int) -> str:
    """Order an item."""
    ORDERS.append((order_id, quantity))
    return f"ordered {quantity} x {order_id}"


def _script() -> ScriptedChatModel:
    call = tool_call("create_order", {"order_id": "tea", "quantity": 2}, id="c1")
    return ScriptedChatModel(script=[AIMessage("", tool_calls=[call]), AIMessage("Done.")])


def _invoke(app: Any, payload: Any, mode: str) -> Any:
    return app.invoke(payload) if mode == "sync" else asyncio.run(app.ainvoke(payload))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("slip", [Slip.CAMEL_CASE, Slip.NUMBER_AS_TEXT, Slip.JSON_TEXT])
def test_in_create_agent_slips_are_repaired_and_a_repeated_write_is_blocked(
    slip: Slip, mode: str
) -> None:
    ORDERS.clear()
    plan = ModelFaultPlan(p_slip=1.0, slips=(slip,), p_repeat=1.0)
    model = FaultyChatModel(inner=_script(), plan=plan)
    agent = create_agent(model, tools=[create_order], middleware=[ResilientToolsMiddleware()])
    state = _invoke(agent, {"messages": [HumanMessage("order tea")]}, mode)
    answers = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in answers] == ["success", "error"]
    assert json.loads(str(answers[1].content))["error"] == "duplicate_call"
    assert ORDERS == [("tea", 2)] and state["messages"][-1].content == "Done."


def test_an_extra_argument_is_refused_for_the_model_to_fix() -> None:
    ORDERS.clear()
    model = FaultyChatModel(
        inner=_script(), plan=ModelFaultPlan(p_slip=1.0, slips=(Slip.EXTRA_ARG,))
    )
    agent = create_agent(model, tools=[create_order], middleware=[ResilientToolsMiddleware()])
    state = agent.invoke({"messages": [HumanMessage("order tea")]})
    [answer] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert json.loads(str(answer.content))["error"] == "invalid_arguments" and ORDERS == []


class _Recording(ScriptedChatModel):
    bound: list[list[str]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, BaseMessage]:  # type: ignore[override]
        self.bound.append([t.name for t in tools])
        return self


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_in_a_hand_built_graph_bind_tools_reaches_the_inner_model(mode: str) -> None:
    ORDERS.clear()
    call = tool_call("create_order", {"order_id": "tea", "quantity": 2}, id="c1")
    inner = _Recording(script=[AIMessage("", tool_calls=[call]), AIMessage("Done.")])
    plan = ModelFaultPlan(p_slip=1.0, slips=(Slip.CAMEL_CASE,))
    model = FaultyChatModel(inner=inner, plan=plan).bind_tools([create_order])

    async def acall(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(ResilientToolsState)
    if mode == "sync":
        graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    else:
        graph.add_node("model", acall)
    graph.add_node("tools", ResilientToolNode([create_order]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    state = _invoke(graph.compile(), {"messages": [HumanMessage("order tea")]}, mode)
    assert state["messages"][1].tool_calls[0]["args"] == {"orderId": "tea", "quantity": 2}
    assert ORDERS == [("tea", 2)] and inner.bound == [["create_order"], ["create_order"]]
