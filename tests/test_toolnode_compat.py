"""A graph that works with `ToolNode` works unchanged with `ResilientToolNode`."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode, ToolRuntime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langchain_resilient_tools import ResilientToolNode, ToolPolicy
from langchain_resilient_tools.testing import tool_call
from tests.support.graphs import tools_graph

NODES = [ToolNode, ResilientToolNode]


class ChatState(TypedDict):
    chat: Annotated[list[Any], add_messages]


class UserState(TypedDict):
    messages: Annotated[list[Any], add_messages]
    user: str


def graph_with(node: Any, state: type = MessagesState, **compile_kwargs: Any) -> Any:
    return tools_graph(node, state, **compile_kwargs)


def run(graph: Any, payload: Any, mode: str, config: Any = None) -> Any:
    if mode == "sync":
        return graph.invoke(payload, config)
    return asyncio.run(graph.ainvoke(payload, config))


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("cls", NODES)
def test_same_answers_for_plain_calls(cls: Any, mode: str) -> None:
    ai = AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="1")])
    out = run(graph_with(cls([add])), {"messages": [ai]}, mode)
    answer = out["messages"][-1]
    assert isinstance(answer, ToolMessage)
    assert (answer.content, answer.tool_call_id, answer.name) == ("3", "1", "add")


def test_message_list_and_bare_tool_call_inputs() -> None:
    node = ResilientToolNode([add])
    ai = AIMessage("", tool_calls=[tool_call("add", {"a": 2, "b": 2}, id="1")])

    out = graph_with(node).invoke({"messages": [ai]})
    assert out["messages"][-1].content == "4"

    # Bare tool calls, as create_agent's Send delivers them.
    def fan_out(state: MessagesState) -> list[Send]:
        return [Send("tools", [tc]) for tc in state["messages"][-1].tool_calls]  # type: ignore[union-attr]

    g = StateGraph(MessagesState)
    g.add_node("tools", node)
    g.add_conditional_edges(START, fan_out, ["tools"])
    g.add_edge("tools", END)
    two = AIMessage(
        "",
        tool_calls=[
            tool_call("add", {"a": 1, "b": 1}, id="x"),
            tool_call("add", {"a": 5, "b": 5}, id="y"),
        ],
    )
    out = g.compile().invoke({"messages": [two]})
    answers = {m.tool_call_id: m.content for m in out["messages"] if isinstance(m, ToolMessage)}
    assert answers == {"x": "2", "y": "10"}


def test_custom_messages_key() -> None:
    ai = AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 1}, id="1")])
    out = graph_with(ResilientToolNode([add], messages_key="chat"), ChatState).invoke(
        {"chat": [ai]}
    )
    assert out["chat"][-1].content == "2"


@pytest.mark.parametrize("cls", NODES)
def test_injected_state_store_and_runtime(cls: Any, mode: str) -> None:
    @tool
    def remember(
        note: str,
        state: Annotated[dict[str, Any], InjectedState],
        store: Annotated[Any, InjectedStore()],
        runtime: ToolRuntime,
    ) -> str:
        """Store a note."""
        store.put(("notes",), "last", {"note": note})
        return f"{note}|{len(state['messages'])}|{runtime.tool_call_id}"

    ai = AIMessage("", tool_calls=[tool_call("remember", {"note": "hi"}, id="r1")])
    store = InMemoryStore()
    out = run(graph_with(cls([remember]), store=store), {"messages": [ai]}, mode)
    assert out["messages"][-1].content == "hi|1|r1"
    item = store.get(("notes",), "last")
    assert item is not None and item.value == {"note": "hi"}


@pytest.mark.parametrize("cls", NODES)
def test_command_returns(cls: Any, mode: str) -> None:
    @tool
    def set_user(name: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
        """Set the user name."""
        return Command(
            update={"user": name, "messages": [ToolMessage("ok", tool_call_id=tool_call_id)]}
        )

    ai = AIMessage("", tool_calls=[tool_call("set_user", {"name": "ada"}, id="u1")])
    out = run(graph_with(cls([set_user]), UserState), {"messages": [ai], "user": ""}, mode)
    assert out["user"] == "ada"
    assert out["messages"][-1].content == "ok"


@pytest.mark.parametrize("cls", NODES)
def test_interrupt_passes_through_and_resumes(cls: Any, mode: str) -> None:
    @tool
    def book_room(room: str) -> str:
        """Book a room after a human approves."""
        answer = interrupt({"approve": room})
        return f"booked {room}: {answer}"

    graph = graph_with(cls([book_room]), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{cls.__name__}-{mode}"}}
    ai = AIMessage("", tool_calls=[tool_call("book_room", {"room": "r1"}, id="b1")])
    first = run(graph, {"messages": [ai]}, mode, config)
    assert "__interrupt__" in first
    assert first["__interrupt__"][0].value == {"approve": "r1"}
    resumed = run(graph, Command(resume="yes"), mode, config)
    assert resumed["messages"][-1].content == "booked r1: yes"


def test_user_wrapper_runs_inside_the_pipeline(mode: str) -> None:
    seen: list[str] = []

    def wrap(request: Any, execute: Any) -> Any:
        seen.append(request.tool_call["name"])
        return execute(request)

    async def awrap(request: Any, execute: Any) -> Any:
        seen.append(request.tool_call["name"])
        return await execute(request)

    node = ResilientToolNode([add], wrap_tool_call=wrap, awrap_tool_call=awrap)
    ai = AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="1")])
    out = run(graph_with(node), {"messages": [ai]}, mode)
    assert out["messages"][-1].content == "3"
    assert seen == ["add"]


def test_behind_a_user_wrapper_sync_tools_still_run_on_the_pipeline_workers(mode: str) -> None:
    """With an ``awrap_tool_call`` of the user's, ToolNode's own execution runs a sync
    tool through LangChain's ``ainvoke``, i.e. on the event loop's default executor; the
    node gives it a stand-in that runs it on its counted workers instead."""
    threads: list[str] = []

    @tool
    def where(x: int) -> str:
        """Report the thread."""
        threads.append(threading.current_thread().name)
        return "here"

    async def awrap(request: Any, execute: Any) -> Any:
        return await execute(request)

    def wrap(request: Any, execute: Any) -> Any:
        return execute(request)

    node = ResilientToolNode([where], wrap_tool_call=wrap, awrap_tool_call=awrap)
    ai = AIMessage("", tool_calls=[tool_call("where", {"x": 1}, id="1")])
    out = run(graph_with(node), {"messages": [ai]}, mode)
    assert out["messages"][-1].content == "here"
    assert len(threads) == 1 and threads[0].startswith("lrt-tool"), threads


def test_a_message_a_user_wrapper_hands_out_twice_is_not_changed(mode: str) -> None:
    """A wrapper with a cache of its own returns the same ToolMessage object again: each
    answer is annotated on a copy, so notes do not pile up on the shared message."""
    cached: dict[str, ToolMessage] = {}

    def wrap(request: Any, execute: Any) -> Any:
        if "add" not in cached:
            cached["add"] = execute(request)
        return cached["add"]

    async def awrap(request: Any, execute: Any) -> Any:
        if "add" not in cached:
            cached["add"] = await execute(request)
        return cached["add"]

    node = ResilientToolNode([add], wrap_tool_call=wrap, awrap_tool_call=awrap)
    graph = graph_with(node)
    for i in range(2):  # 'A' is read as 'a': each answer carries one repair note
        ai = AIMessage("", tool_calls=[tool_call("add", {"A": 1, "b": 2}, id=f"c{i}")])
        answer = run(graph, {"messages": [ai]}, mode)["messages"][-1]
        assert str(answer.content).count("[Note:") == 1
        assert str(answer.content).endswith("3")
    assert cached["add"].content == "3" and "resilience" not in cached["add"].response_metadata


def test_user_wrapper_may_answer_unknown_tools(mode: str) -> None:
    def wrap(request: Any, execute: Any) -> Any:
        if request.tool is None:
            return ToolMessage("handled", tool_call_id=request.tool_call["id"])
        return execute(request)

    async def awrap(request: Any, execute: Any) -> Any:
        return wrap(request, execute)

    node = ResilientToolNode([add], wrap_tool_call=wrap, awrap_tool_call=awrap)
    ai = AIMessage("", tool_calls=[tool_call("dynamic", {}, id="1")])
    out = run(graph_with(node), {"messages": [ai]}, mode)
    assert out["messages"][-1].content == "handled"


@tool
def explode(x: int) -> str:
    """Always fails."""
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    ("handle", "expect"),
    [
        (True, "envelope"),
        ("Tool failed.", "Tool failed."),
        (RuntimeError, "envelope"),
        (ValueError, "raise"),
        (False, "raise"),
    ],
)
def test_handle_tool_errors_keeps_its_meaning(handle: Any, expect: str) -> None:
    node = ResilientToolNode([explode], handle_tool_errors=handle)
    ai = AIMessage("", tool_calls=[tool_call("explode", {"x": 1}, id="1")])
    graph = graph_with(node)
    if expect == "raise":
        with pytest.raises(RuntimeError, match="boom"):
            graph.invoke({"messages": [ai]})
        return
    answer = graph.invoke({"messages": [ai]})["messages"][-1]
    assert answer.status == "error"
    if expect == "envelope":
        assert json.loads(answer.content)["error"] == "tool_error"
    else:
        assert answer.content == expect


@tool
def forgets_its_answer(x: int) -> list[Any]:
    """A wiring bug: returns a list without its terminating ToolMessage."""
    return [Command(update={"foo": "bar"})]


@pytest.mark.parametrize("handle", ["default", False, ValueError, True])
def test_a_list_without_its_tool_message(handle: Any, mode: str) -> None:
    """Raised by default and with False, as ToolNode raises it; answered (with the
    envelope, and a ``tool_errors`` record) when the author asks for errors to be handled."""
    from langchain_resilient_tools import ResilientToolsState

    kwargs = {} if handle == "default" else {"handle_tool_errors": handle}
    node = ResilientToolNode([forgets_its_answer], **kwargs)
    ai = AIMessage("", tool_calls=[tool_call("forgets_its_answer", {"x": 1}, id="1")])
    graph = graph_with(node, ResilientToolsState)
    if handle in ("default", False):
        with pytest.raises(ValueError, match="0 messages bound to tool_call_id '1'"):
            run(graph, {"messages": [ai]}, mode)
        return
    out = run(graph, {"messages": [ai]}, mode)
    answer = out["messages"][-1]
    assert (answer.status, answer.tool_call_id) == ("error", "1")
    data = json.loads(answer.content)
    assert data["error"] == "tool_error"
    assert "0 messages bound to tool_call_id '1'" in data["message"]
    assert [r["error"] for r in out["tool_errors"]] == ["tool_error"]


def test_handle_tool_errors_callable() -> None:
    def handler(e: RuntimeError) -> str:
        return f"custom: {type(e).__name__}"

    node = ResilientToolNode([explode], handle_tool_errors=handler)
    ai = AIMessage("", tool_calls=[tool_call("explode", {"x": 1}, id="1")])
    answer = graph_with(node).invoke({"messages": [ai]})["messages"][-1]
    assert answer.content == "custom: RuntimeError"


def test_max_concurrency_is_honoured(mode: str) -> None:
    active = 0
    peak = 0
    lock = threading.Lock()
    gate = threading.Event()

    @tool
    def get_item(i: int) -> int:
        """Get an item."""
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        gate.wait(0.05)
        with lock:
            active -= 1
        return i

    node = ResilientToolNode([get_item], policy=ToolPolicy(timeout=5))
    calls = [tool_call("get_item", {"i": i}, id=str(i)) for i in range(8)]
    out = run(
        graph_with(node),
        {"messages": [AIMessage("", tool_calls=calls)]},
        mode,
        {"max_concurrency": 2},
    )
    assert sorted(int(m.content) for m in out["messages"][1:]) == list(range(8))
    assert peak <= 2


def test_tool_errors_written_only_when_state_has_the_key() -> None:
    ai = AIMessage("", tool_calls=[tool_call("explode", {"x": 1}, id="1")])
    out = graph_with(ResilientToolNode([explode])).invoke({"messages": [ai]})
    assert "tool_errors" not in out
    assert out["messages"][-1].status == "error"
