"""An offline agent whose tools misbehave, run through `ToolNode` and `ResilientToolNode`.

    python -m langchain_resilient_tools.demo

A scripted chat model (no network, no API key) asks for seven tool calls in one turn:
a flaky search, a hung report, a booking that hangs after it may have charged, a tool
that leaks a password in its error, a misspelt tool, a call whose JSON is broken but
repairable, and one whose JSON was cut off. The same calls go through LangGraph's plain
`ToolNode` and through `ResilientToolNode`, and the demo shows, call by call and side by
side, what each one answers. Where `ToolNode` hangs, the demo stops waiting after a few
seconds and says so; where it crashes, the demo shows the exception that escapes; where
it leaks a secret to the model, the demo masks it in its own output.
"""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from . import ResilientToolNode, ResilientToolsState, RetryPolicy, ToolPolicy
from .prompts import TOOL_ERROR_GUIDANCE, with_tool_error_guidance
from .testing import ScriptedChatModel, invalid_call, tool_call

_release = threading.Event()
_flaky_left: dict[str, int] = {}
"""Failures still to come, per destination searched (each search fails as often first)."""
_executions: dict[str, int] = {}

SECRET = "hunter2"
"""The password `get_customer` leaks in its error (masked wherever this demo prints it)."""

HANG_LIMIT_S = 3.0
"""How long the demo waits for `ToolNode` before it reports a hang (its tools hang 30 s)."""


def _count(name: str) -> None:
    _executions[name] = _executions.get(name, 0) + 1


@tool
def search_flights(destination: str) -> str:
    """Search flights to a destination."""
    _count("search_flights")
    if _flaky_left.get(destination, 0) > 0:
        _flaky_left[destination] -= 1
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
        f"connect failed: postgresql://app:{SECRET}@db.internal:5432/crm password={SECRET}"
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

WIDTH = 100
LABEL = 22


def _mask(text: str) -> str:
    """`text` with the leaked secret masked, so this demo's own output never shows it."""
    return text.replace(SECRET, SECRET[0] + "*" * (len(SECRET) - 2) + SECRET[-1])


def _row(who: str, kind: str, text: str) -> str:
    """One labelled, wrapped row: long texts wrap, nothing is cut."""
    label = f"{who:<10}{kind}"
    body = " ".join(_mask(str(text)).split())
    lines = textwrap.wrap(body, WIDTH - LABEL - 2) or [""]
    pad = " " * (LABEL + 2)
    return "\n".join(
        f"  {label:<{LABEL}}{lines[0]}" if i == 0 else f"{pad}{line}"
        for i, line in enumerate(lines)
    )


def _toolnode_graph(node: ToolNode) -> Any:
    g: Any = StateGraph(MessagesState)
    g.add_node("tools", node)
    g.add_edge(START, "tools")
    g.add_edge("tools", END)
    return g.compile()


def _with_limit(fn: Callable[[], Any], limit: float) -> tuple[str, Any]:
    """Run `fn` on a daemon thread: ("ok", result), ("raised", exc) or ("hung", None)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["ok"] = fn()
        except Exception as exc:
            box["raised"] = exc

    thread = threading.Thread(target=run, daemon=True, name="demo-toolnode")
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        return "hung", None
    return ("ok", box["ok"]) if "ok" in box else ("raised", box["raised"])


def _toolnode_answer(call: Any, limit: float) -> list[tuple[str, str]]:
    """What plain `ToolNode` (default settings) does with `call` alone, as labelled rows."""
    ai = AIMessage("", tool_calls=[call])
    graph = _toolnode_graph(ToolNode(TOOLS))
    kind, value = _with_limit(lambda: graph.invoke({"messages": [ai]}), limit)
    if kind == "hung":
        return [
            (
                "HANG",
                f"no answer after {limit:g} s; the demo stopped waiting. ToolNode has no "
                "timeout: the tool holds the whole step for as long as it hangs (30 s here).",
            )
        ]
    if kind == "raised":
        rows = [
            (
                "CRASH",
                f"{type(value).__name__} escapes the graph (ToolNode re-raises tool errors by "
                "default): the run fails and the sibling calls' results are lost.",
            )
        ]
        lenient = _toolnode_graph(ToolNode(TOOLS, handle_tool_errors=True))
        _, state = _with_limit(lambda: lenient.invoke({"messages": [ai]}), limit)
        answer = state["messages"][-1] if isinstance(state, dict) else None
        if isinstance(answer, ToolMessage) and answer.status == "error":
            text = str(answer.content)
            leaked = " [LEAKED: the model reads the password; masked here by the demo]"
            rows.append(
                (
                    "",
                    f"With handle_tool_errors=True the model reads: {text}"
                    + (leaked if SECRET in text else ""),
                )
            )
        return rows
    message = value["messages"][-1]
    return [(message.status, str(message.content))]


def _resilient_rows(message: ToolMessage | None) -> list[tuple[str, str]]:
    if message is None:
        return [("NO ANSWER", "the call is left dangling")]
    record = message.response_metadata.get("resilience", {})
    tries = record.get("attempts")
    facts = f"[{tries} attempt(s), {record.get('duration_ms', 0):.0f} ms] " if record else ""
    try:
        body = json.loads(str(message.content))
    except ValueError:
        body = None
    if message.status == "error" and isinstance(body, dict):
        rows = [("error", f"{facts}{body['error']}: {body.get('message', '')}")]
        if body.get("suggestion"):
            rows.append(("", f"Suggestion: {body['suggestion']}"))
        return rows
    return [("success", f"{facts}{message.content}")]


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


def _title(text: str) -> None:
    print(f"\n{text}\n{'=' * len(text)}")


def _describe(call: Any) -> str:
    if "error" in call or call.get("type") == "invalid_tool_call":
        return f"{call['name']} with malformed arguments {call['args']}"
    args = ", ".join(f"{k}={v!r}" for k, v in call["args"].items())
    return f"{call['name']}({args})"


def main(*, hang_limit: float = HANG_LIMIT_S) -> None:
    """Run the demo; `hang_limit` is how long it waits for `ToolNode` before calling it hung."""
    calls: list[Any] = [*TURN.tool_calls, *TURN.invalid_tool_calls]
    _release.clear()
    _flaky_left.clear()
    _flaky_left["Lisbon"] = 2  # the whole turn's search and the same call alone both fail

    # Plain ToolNode: the whole turn, and each call on its own (to see what each one
    # does), all at once on daemon threads, each waited for at most `hang_limit` s.
    graph = _toolnode_graph(ToolNode(TOOLS))
    whole: list[tuple[str, Any]] = []
    toolnode: dict[str, list[tuple[str, str]]] = {}
    jobs: list[Callable[[], Any]] = [
        lambda: whole.append(_with_limit(lambda: graph.invoke({"messages": [TURN]}), hang_limit))
    ]

    def answer(call: Any) -> None:
        toolnode[str(call["id"])] = _toolnode_answer(call, hang_limit)

    jobs.extend(partial(answer, call) for call in TURN.tool_calls)
    workers = [threading.Thread(target=job, daemon=True) for job in jobs]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for bad in TURN.invalid_tool_calls:
        toolnode[str(bad["id"])] = [
            ("NO ANSWER", "invalid_tool_calls are never answered: the call is left dangling.")
        ]

    # The same flaky service for ResilientToolNode: each search fails once (per
    # destination, so the two searches of the turn, run at once, meet one failure each).
    _flaky_left.update(Lisbon=1, Porto=1)
    _executions.clear()
    start = time.monotonic()
    state = _graph(ResilientToolNode(TOOLS, policy=POLICY)).invoke(
        {"messages": [HumanMessage("plan my trip")]}
    )
    elapsed = time.monotonic() - start
    answers = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}

    _title("The whole turn")
    kind, value = whole[0]
    if kind == "hung":
        print(
            _row(
                "ToolNode",
                "HANG",
                f"no answer after {hang_limit:g} s: the demo stopped waiting (the hung tools "
                "hold the step for 30 s; then the first tool error crashes it).",
            )
        )
    else:
        print(_row("ToolNode", kind, repr(value)))
    print(
        _row(
            "Resilient",
            "success",
            f"every call answered in {elapsed:.2f} s; the agent went on to answer "
            f"{state['messages'][-1].content!r}.",
        )
    )

    _title("Call by call: what ToolNode and ResilientToolNode answer")
    for call in calls:
        call_id = str(call["id"])
        print(f"\n{call_id}: {_describe(call)}")
        for kind, text in toolnode[call_id]:
            print(_row("ToolNode", kind, text))
        for kind, text in _resilient_rows(answers.get(call_id)):
            print(_row("Resilient", kind, text))

    _title("ResilientToolNode, inside a running agent")
    print(f"tool executions: {_executions}")
    print(f"tool_errors in graph state: {len(state['tool_errors'])} records")
    leaked = SECRET in json.dumps([str(m.content) for m in state["messages"]])
    print(f"secret leaked to the model: {leaked}")
    first_line = TOOL_ERROR_GUIDANCE.strip().splitlines()[0]
    print(f"system prompt ends with the error guidance: {first_line!r} …")
    _release.set()


if __name__ == "__main__":
    main()
