"""An offline agent whose tools misbehave, run with and without the resilience layer.

    python -m langchain_resilient_tools.demo

A scripted chat model (no network, no API key) asks for seven tool calls in one turn:
a flaky search, a hung report, a booking that hangs after it may have charged, a
tool that leaks a password in its error, a misspelt tool, a call whose JSON is
broken but repairable, and one whose JSON was cut off. The same turn is run through LangGraph's `ToolNode` and `ResilientToolNode`,
and a per-call report shows what the model would see.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from . import ResilientToolNode, ResilientToolsState, RetryPolicy, ToolPolicy
from .prompts import TOOL_ERROR_GUIDANCE, with_tool_error_guidance
from .testing import ScriptedChatModel, invalid_call, tool_call

_release = threading.Event()
_flaky_left = {"n": 2}
_executions: dict[str, int] = {}


def _count(name: str) -> None:
    _executions[name] = _executions.get(name, 0) + 1


@tool
def search_flights(destination: str) -> str:
    """Search flights to a destination."""
    _count("search_flights")
    if _flaky_left["n"] > 0:
        _flaky_left["n"] -= 1
        raise ConnectionError("upstream reset by peer")
    return json.dumps({"flights": [{"to": destination, "price": 129}]})


@tool
def get_report(topic: str) -> str:
    """Fetch an analyst report (its service hangs)."""
    _count("get_report")
    _release.wait(30)
    return "late report"


@tool
def create_booking(flight: str) -> str:
    """Book a flight (its service hangs after charging)."""
    _count("create_booking")
    _release.wait(30)
    return "booked"


@tool
def get_customer(customer_id: str) -> str:
    """Look up a customer (its database errors leak a password)."""
    _count("get_customer")
    raise ValueError(
        "connect failed: postgresql://app:hunter2@db.internal:5432/crm password=hunter2"
    )


@tool
def lookup_user(name: str) -> str:
    """Find a user by name."""
    _count("lookup_user")
    return f"user {name}"


TOOLS: list[BaseTool] = [search_flights, get_report, create_booking, get_customer, lookup_user]

TURN = AIMessage(
    "",
    tool_calls=[
        tool_call("search_flights", {"destination": "Lisbon"}, id="call_search"),
        tool_call("get_report", {"topic": "fares"}, id="call_report"),
        tool_call("create_booking", {"flight": "TP123"}, id="call_book"),
        tool_call("get_customer", {"customer_id": "c-42"}, id="call_customer"),
        tool_call("lookup_usr", {"name": "ada"}, id="call_typo"),
    ],
    invalid_tool_calls=[
        invalid_call("search_flights", "{'Destination': 'Porto',}", id="call_fixable"),
        invalid_call("search_flights", '{"destination": "Lis', id="call_cut"),
    ],
)

POLICY = ToolPolicy(timeout=0.5, retry=RetryPolicy(max_attempts=3, initial_delay=0.05, jitter=0))


SYSTEM = SystemMessage(with_tool_error_guidance("You are a travel assistant."))
"""The agent's system prompt, with the guidance on reading tool errors appended."""


def _graph(node: Any) -> Any:
    model = ScriptedChatModel(script=[TURN, AIMessage("Here is what I found.")])
    g = StateGraph(ResilientToolsState)
    g.add_node("agent", lambda state: {"messages": [model.invoke([SYSTEM, *state["messages"]])]})
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    g.add_edge("agent", END)
    return g.compile()


@contextmanager
def _section(title: str) -> Iterator[None]:
    print(f"\n{title}\n{'=' * len(title)}")
    yield


def _short(text: str, n: int = 96) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _report(state: dict[str, Any]) -> None:
    answers = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    ids = [str(tc["id"]) for tc in TURN.tool_calls + TURN.invalid_tool_calls]
    print(f"{'call':<14} {'status':<8} {'error':<18} {'tries':>5} {'ms':>6}  what the model reads")
    for call_id in ids:
        msg = answers.get(call_id)
        if msg is None:
            print(
                f"{call_id:<14} {'—':<8} {'NO ANSWER':<18} {'':>5} {'':>6}  (the call is left dangling)"
            )
            continue
        record = msg.response_metadata.get("resilience", {})
        try:
            body = json.loads(str(msg.content))
        except ValueError:
            body = None
        error = body.get("error", "") if isinstance(body, dict) and "error" in body else ""
        text = body.get("message", msg.content) if error else msg.content
        print(
            f"{call_id:<14} {msg.status:<8} {error:<18} {record.get('attempts', ''):>5} "
            f"{record.get('duration_ms', 0):>6.0f}  {_short(str(text))}"
        )


def main() -> None:
    with _section("1. LangGraph's ToolNode(handle_tool_errors=True), hanging tools left out"):
        quick = [t for t in TOOLS if t.name not in ("get_report", "create_booking")]
        turn_calls = [
            tc for tc in TURN.tool_calls if tc["name"] not in ("get_report", "create_booking")
        ]
        model_turn = TURN.model_copy(update={"tool_calls": turn_calls})
        g: Any = StateGraph(ResilientToolsState)
        g.add_node("tools", ToolNode(quick, handle_tool_errors=True))
        g.add_edge(START, "tools")
        g.add_edge("tools", END)
        state = g.compile().invoke({"messages": [model_turn]})
        for m in state["messages"][1:]:
            print(f"{m.tool_call_id:<14} {m.status:<8} {_short(str(m.content))}")
        print("call_fixable   —        NO ANSWER: invalid_tool_calls are never answered")
        print("call_cut       —        NO ANSWER: invalid_tool_calls are never answered")
        print(
            "(ToolNode has no timeout: get_report and create_booking would hang the step for 30 s)"
        )

    _flaky_left["n"] = 2
    _executions.clear()
    with _section("2. ResilientToolNode on the full turn, inside a running agent"):
        start = time.monotonic()
        state = _graph(ResilientToolNode(TOOLS, policy=POLICY)).invoke(
            {"messages": [HumanMessage("plan my trip")]}
        )
        elapsed = time.monotonic() - start
        _report(state)
        print(f"\nwhole step: {elapsed:.2f} s; tool executions: {_executions}")
        print(f"tool_errors in graph state: {len(state['tool_errors'])} records")
        print(f"the agent went on to answer: {state['messages'][-1].content!r}")
        leaked = "hunter2" in json.dumps([str(m.content) for m in state["messages"]])
        print(f"secret leaked to the model: {leaked}")
        first_line = TOOL_ERROR_GUIDANCE.strip().splitlines()[0]
        print(f"system prompt ends with the error guidance: {first_line!r} …")
    _release.set()


if __name__ == "__main__":
    main()
