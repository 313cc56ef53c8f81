"""Drop-in parity: the same scenario through `ToolNode` and `ResilientToolNode` gives the
same output, sync and async, invoked directly and in a compiled graph.

LangGraph's own ToolNode tests (libs/prebuilt/tests) are the reference for what
ToolNode does; these are our own tests of the same behaviours, each one run through
both classes and compared, so that a graph that works with `ToolNode` works unchanged
when the class name is swapped. Intended differences are tested elsewhere
(`test_toolnode_compat.py`, the README's "Differences from ToolNode").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import (
    BaseTool,
    InjectedToolCallId,
    StructuredTool,
    ToolException,
    tool,
)
from langgraph.config import get_stream_writer
from langgraph.graph import MessagesState
from langgraph.prebuilt import InjectedState, InjectedStore, ToolNode, ToolRuntime
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, Send
from pydantic import BaseModel

from langchain_resilient_tools import ResilientToolNode
from langchain_resilient_tools.testing import tool_call
from tests.support.graphs import tools_graph

CLASSES = (ToolNode, ResilientToolNode)


class CountState(MessagesState):
    count: int


# -- tools ------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def amultiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def set_count(n: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Set the counter (a Command with its own ToolMessage)."""
    return Command(
        update={"count": n, "messages": [ToolMessage(f"count={n}", tool_call_id=tool_call_id)]}
    )


@tool
async def aset_count(n: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """Set the counter, async."""
    return Command(
        update={"count": n, "messages": [ToolMessage(f"count={n}", tool_call_id=tool_call_id)]}
    )


@tool
def list_return(n: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> list[Any]:
    """A list of a Command and the terminating ToolMessage."""
    return [Command(update={"count": n}), ToolMessage(f"listed {n}", tool_call_id=tool_call_id)]


@tool
async def alist_return(n: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> list[Any]:
    """A list of Commands, the terminator nested in the second one (async)."""
    return [
        Command(update={"count": n}),
        Command(update={"messages": [ToolMessage(f"nested {n}", tool_call_id=tool_call_id)]}),
    ]


@tool
def one_command(n: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> list[Any]:
    """A list of one Command that carries the terminator (not a text to read as an error)."""
    return [
        Command(update={"count": n, "messages": [ToolMessage("one", tool_call_id=tool_call_id)]})
    ]


@tool
def hand_off(target: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
    """A parent-graph goto with Sends."""
    return Command(graph=Command.PARENT, goto=[Send(target, {"from": tool_call_id})])


@tool
def no_answer(n: int) -> Command[Any]:
    """A wiring bug: a Command without a ToolMessage for its call."""
    return Command(update={"count": n})


@tool
def wrong_id(n: int) -> Command[Any]:
    """A wiring bug: the ToolMessage answers another call."""
    return Command(update={"messages": [ToolMessage("x", tool_call_id="not-this-one")]})


@tool
def no_terminator(n: int) -> list[Any]:
    """A wiring bug: a list without the ToolMessage that answers its call."""
    return [Command(update={"foo": "bar"})]


@tool
async def ano_terminator(n: int) -> list[Any]:
    """The same wiring bug, async."""
    return [Command(update={"foo": "bar"})]


@tool
def remember(key: str, store: Annotated[Any, InjectedStore()]) -> str:
    """Keep a key in the store."""
    store.put(("notes",), key, {"v": 1})
    return f"kept {key}"


@tool
def whoami(question: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
    """Answer from the graph state."""
    return f"{question}: {len(state['messages'])} messages"


@tool
def ask_runtime(question: str, runtime: ToolRuntime) -> str:
    """Answer from the runtime."""
    return f"{question} in call {runtime.tool_call_id}"


@tool
def streamer(text: str) -> str:
    """Emits custom stream events."""
    write = get_stream_writer()
    write({"progress": f"start {text}"})
    write({"progress": f"end {text}"})
    return text.upper()


@tool
async def astreamer(text: str) -> str:
    """Emits custom stream events, async."""
    write = get_stream_writer()
    write({"progress": f"astart {text}"})
    return text.lower()


def _raise_tool_exception(city: str) -> str:
    raise ToolException(f"no station for {city}")


def _handled(handler: Any) -> BaseTool:
    return StructuredTool.from_function(
        _raise_tool_exception,
        name="get_station",
        description="The weather station of a city.",
        handle_tool_error=handler,
    )


def _strict(handler: Any) -> BaseTool:
    return StructuredTool.from_function(
        lambda a, b: a + b,
        name="strict_add",
        description="Add two integers.",
        args_schema=_AddArgs,
        handle_validation_error=handler,
    )


class _AddArgs(BaseModel):
    a: int
    b: int


@tool
def explode(city: str) -> str:
    """Fails with a plain exception."""
    raise ValueError(f"boom in {city}")


# -- running a scenario through one class -----------------------------------------


@dataclass
class Run:
    """One way of reaching the node."""

    mode: str  # sync | async
    via: str  # direct | graph

    def __str__(self) -> str:
        return f"{self.mode}-{self.via}"


RUNS = [Run(m, v) for m in ("sync", "async") for v in ("direct", "graph")]


@dataclass
class Scenario:
    tools: list[Any]
    calls: list[dict[str, Any]]
    state: type = MessagesState
    extra_state: dict[str, Any] = field(default_factory=dict)
    node_kwargs: dict[str, Any] = field(default_factory=dict)
    store: bool = False
    input_form: str = "dict"  # dict | list


def _payload(s: Scenario) -> Any:
    ai = AIMessage("", tool_calls=s.calls, id="ai-1")
    if s.input_form == "list":
        return [ai]
    return {"messages": [ai], **s.extra_state}


def _strip(value: Any) -> Any:
    """Messages compared without their ids (a graph gives every message a fresh one)."""
    if isinstance(value, BaseMessage):
        return value.model_copy(update={"id": None})
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()}
    if isinstance(value, Command):
        return Command(graph=value.graph, update=_strip(value.update), goto=value.goto)
    return value


def _outcome(fn: Callable[[], Any]) -> Any:
    """The result, or the exception's type and text, of `fn()`."""
    try:
        return ("ok", _strip(fn()))
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))


def run_with(cls: type[ToolNode], s: Scenario, run: Run) -> Any:
    node = cls(s.tools, **s.node_kwargs)
    payload = _payload(s)
    store = InMemoryStore() if s.store else None
    if run.via == "direct":  # outside a graph, ToolNode takes its runtime from the config
        config: Any = {"configurable": {"__pregel_runtime": Runtime(store=store)}}
        if run.mode == "sync":
            return _outcome(lambda: node.invoke(payload, config))
        return _outcome(lambda: asyncio.run(node.ainvoke(payload, config)))
    compiled = tools_graph(node, s.state, store=store)
    if run.mode == "sync":
        return _outcome(lambda: compiled.invoke(payload))
    return _outcome(lambda: asyncio.run(compiled.ainvoke(payload)))


def assert_parity(s: Scenario, run: Run) -> Any:
    expected = run_with(ToolNode, s, run)
    actual = run_with(ResilientToolNode, s, run)
    assert actual == expected
    return expected


@pytest.fixture(params=RUNS, ids=str)
def way(request: pytest.FixtureRequest) -> Run:
    return request.param  # type: ignore[no-any-return]


# -- healthy calls ----------------------------------------------------------------


def test_healthy_single_call(way: Run) -> None:
    s = Scenario([add], [tool_call("add", {"a": 1, "b": 2}, id="c1")])
    result = assert_parity(s, way)
    assert result[0] == "ok"


def test_healthy_parallel_calls(way: Run) -> None:
    calls = [
        tool_call("add", {"a": 1, "b": 2}, id="c1"),
        tool_call("get_weather", {"city": "Oslo"}, id="c3"),
    ]
    if way.mode == "async":  # ToolNode runs async-only tools on its async path only
        calls.insert(1, tool_call("amultiply", {"a": 3, "b": 4}, id="c2"))
    s = Scenario([add, amultiply, get_weather], calls)
    assert assert_parity(s, way)[0] == "ok"


def test_healthy_message_list_input(way: Run) -> None:
    if way.via == "graph":
        pytest.skip("a graph's state is a dict")
    s = Scenario([add], [tool_call("add", {"a": 1, "b": 2}, id="c1")], input_form="list")
    assert assert_parity(s, way)[0] == "ok"


def test_healthy_message_has_no_record() -> None:
    node = ResilientToolNode([add])
    ai = AIMessage("", tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="c1")])
    out = node.invoke({"messages": [ai]}, {"configurable": {"__pregel_runtime": Runtime()}})
    assert out["messages"][0].response_metadata == {}


# -- Command returns --------------------------------------------------------------


def test_command_return(way: Run) -> None:
    s = Scenario(
        [set_count, aset_count, add],
        [
            tool_call("set_count", {"n": 3}, id="c1"),
            tool_call("add", {"a": 1, "b": 1}, id="c2"),
        ],
        state=CountState,
        extra_state={"count": 0},
    )
    assert assert_parity(s, way)[0] == "ok"


def test_async_command_return(way: Run) -> None:
    if way.mode == "sync":
        pytest.skip("an async-only tool")
    s = Scenario(
        [aset_count],
        [tool_call("aset_count", {"n": 5}, id="c1")],
        state=CountState,
        extra_state={"count": 0},
    )
    assert assert_parity(s, way)[0] == "ok"


def test_list_return_mixed_with_regular_tools(way: Run) -> None:
    s = Scenario(
        [list_return, add],
        [
            tool_call("list_return", {"n": 7}, id="c1"),
            tool_call("add", {"a": 2, "b": 2}, id="c2"),
        ],
        state=CountState,
        extra_state={"count": 0},
    )
    result = assert_parity(s, way)
    assert result[0] == "ok"


def test_list_return_with_nested_terminator(way: Run) -> None:
    if way.mode == "sync":
        pytest.skip("an async-only tool")
    s = Scenario(
        [alist_return],
        [tool_call("alist_return", {"n": 4}, id="c1")],
        state=CountState,
        extra_state={"count": 0},
    )
    assert assert_parity(s, way)[0] == "ok"


def test_list_of_one_command(way: Run) -> None:
    s = Scenario(
        [one_command],
        [tool_call("one_command", {"n": 2}, id="c1")],
        state=CountState,
        extra_state={"count": 0},
    )
    assert assert_parity(s, way)[0] == "ok"


def test_parent_goto_commands_combined() -> None:
    s = Scenario(
        [hand_off],
        [
            tool_call("hand_off", {"target": "a"}, id="c1"),
            tool_call("hand_off", {"target": "b"}, id="c2"),
        ],
    )
    for mode in ("sync", "async"):
        result = assert_parity(s, Run(mode, "direct"))
        assert result[0] == "ok"


# -- wiring errors raise ----------------------------------------------------------


WIRING_BUGS = [no_answer, wrong_id, no_terminator, ano_terminator]


def _bug_scenario(bug: BaseTool, way: Run, **node_kwargs: Any) -> Scenario:
    if way.mode == "sync" and bug is ano_terminator:
        pytest.skip("an async-only tool")
    return Scenario(
        [bug],
        [tool_call(bug.name, {"n": 1}, id="c1")],
        state=CountState,
        extra_state={"count": 0},
        node_kwargs=node_kwargs,
    )


@pytest.mark.parametrize("bug", WIRING_BUGS, ids=lambda t: t.name)
@pytest.mark.parametrize("handle", ["default", False], ids=["default", "false"])
def test_invalid_command_raises(way: Run, bug: BaseTool, handle: Any) -> None:
    kwargs = {} if handle == "default" else {"handle_tool_errors": handle}
    result = assert_parity(_bug_scenario(bug, way, **kwargs), way)
    assert result[:2] == ("raised", "ValueError")
    if bug in (no_terminator, ano_terminator):
        assert "0 messages bound to tool_call_id 'c1'" in result[2]


def _catch_value_error(e: ValueError) -> str:
    return f"wiring: {e}"


def _catch_key_error(e: KeyError) -> str:
    return f"missing {e}"


@pytest.mark.parametrize("bug", WIRING_BUGS, ids=lambda t: t.name)
@pytest.mark.parametrize(
    "handler",
    ["the tool is broken", lambda e: f"handled: {e}", _catch_value_error],
    ids=["str", "callable", "typed-callable"],
)
def test_invalid_command_answered_as_toolnode_answers_it(
    way: Run, bug: BaseTool, handler: Any
) -> None:
    result = assert_parity(_bug_scenario(bug, way, handle_tool_errors=handler), way)
    assert result[0] == "ok"


@pytest.mark.parametrize("bug", WIRING_BUGS, ids=lambda t: t.name)
@pytest.mark.parametrize(
    "handler", [(KeyError,), _catch_key_error], ids=["tuple", "typed-callable"]
)
def test_invalid_command_raises_when_the_handler_does_not_catch_it(
    way: Run, bug: BaseTool, handler: Any
) -> None:
    result = assert_parity(_bug_scenario(bug, way, handle_tool_errors=handler), way)
    assert result[:2] == ("raised", "ValueError")


@pytest.mark.parametrize("bug", WIRING_BUGS, ids=lambda t: t.name)
@pytest.mark.parametrize("handle", [True, False, "the tool is broken"], ids=str)
def test_invalid_command_through_the_wrapper(way: Run, bug: BaseTool, handle: Any) -> None:
    """A wrapped tool hands its return to the ToolNode around it, which judges it."""
    from langchain_resilient_tools import ResilientTool

    s = _bug_scenario(bug, way, handle_tool_errors=handle)
    expected = run_with(ToolNode, s, way)
    s.tools = [ResilientTool.wrap(bug)]
    assert run_with(ToolNode, s, way) == expected


def _error_answers(result: Any) -> list[ToolMessage]:
    assert result[0] == "ok", result
    out = result[1]
    messages = out if isinstance(out, list) else out["messages"]
    return [m for m in messages if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("bug", WIRING_BUGS, ids=lambda t: t.name)
def test_invalid_command_answered_with_handle_tool_errors_true(way: Run, bug: BaseTool) -> None:
    """ToolNode answers ``Error: ValueError(...)``; we answer the same error in the
    envelope (an intended difference: never an exception repr), with its text."""
    s = _bug_scenario(bug, way, handle_tool_errors=True)
    (expected,) = _error_answers(run_with(ToolNode, s, way))
    (actual,) = _error_answers(run_with(ResilientToolNode, s, way))
    assert (actual.status, actual.tool_call_id, actual.name) == (
        expected.status, expected.tool_call_id, expected.name,
    ) == ("error", "c1", bug.name)  # fmt: skip
    data = json.loads(str(actual.content))
    assert data["error"] == "tool_error" and data["tool"] == bug.name
    if bug in (no_terminator, ano_terminator):
        assert "0 messages bound to tool_call_id" in str(expected.content)
        assert "0 messages bound to tool_call_id 'c1'" in data["message"]


def test_injected_store_without_store_raises(way: Run) -> None:
    s = Scenario([remember], [tool_call("remember", {"key": "k"}, id="c1")])
    result = assert_parity(s, way)
    assert result[:2] == ("raised", "ValueError")


# -- injected arguments -----------------------------------------------------------


def test_injected_arguments(way: Run) -> None:
    s = Scenario(
        [whoami, ask_runtime, remember],
        [
            tool_call("whoami", {"question": "q"}, id="c1"),
            tool_call("ask_runtime", {"question": "r"}, id="c2"),
            tool_call("remember", {"key": "k"}, id="c3"),
        ],
        store=True,
    )
    assert assert_parity(s, way)[0] == "ok"


def test_model_values_for_injected_arguments_are_replaced_silently(way: Run) -> None:
    s = Scenario(
        [whoami, ask_runtime, remember],
        [
            tool_call("whoami", {"question": "q", "state": {"forged": 1}}, id="c1"),
            tool_call("ask_runtime", {"question": "r", "runtime": "x"}, id="c2"),
            tool_call("remember", {"key": "k", "store": "mine"}, id="c3"),
        ],
        store=True,
    )
    assert assert_parity(s, way)[0] == "ok"


def test_injected_state_direct(way: Run) -> None:
    if way.via == "graph":
        pytest.skip("covered above")
    s = Scenario(
        [whoami, ask_runtime],
        [
            tool_call("whoami", {"question": "q", "state": "forged"}, id="c1"),
            tool_call("ask_runtime", {"question": "r"}, id="c2"),
        ],
    )
    assert assert_parity(s, way)[0] == "ok"


# -- error handling set on the tool, and on the node -------------------------------


@pytest.mark.parametrize(
    "handler",
    [True, "the station is down", lambda e: f"handled: {e}"],
    ids=["true", "str", "callable"],
)
def test_tool_own_handle_tool_error(way: Run, handler: Any) -> None:
    s = Scenario([_handled(handler)], [tool_call("get_station", {"city": "Oslo"}, id="c1")])
    result = assert_parity(s, way)
    assert result[0] == "ok"


@pytest.mark.parametrize("handler", [True, "give two integers"], ids=["true", "str"])
def test_tool_own_handle_validation_error(way: Run, handler: Any) -> None:
    s = Scenario([_strict(handler)], [tool_call("strict_add", {"a": "x", "b": 2}, id="c1")])
    result = assert_parity(s, way)
    assert result[0] == "ok"


def test_node_handle_tool_errors_false_raises_tool_exception(way: Run) -> None:
    s = Scenario(
        [explode],
        [tool_call("explode", {"city": "Oslo"}, id="c1")],
        node_kwargs={"handle_tool_errors": False},
    )
    assert assert_parity(s, way)[:2] == ("raised", "ValueError")


def test_node_handle_tool_errors_false_raises_validation_error(way: Run) -> None:
    s = Scenario(
        [add],
        [tool_call("add", {"a": "not a number", "b": 2}, id="c1")],
        node_kwargs={"handle_tool_errors": False},
    )
    assert assert_parity(s, way)[:2] == ("raised", "ToolInvocationError")


def _on_key_error(e: KeyError) -> str:
    return f"missing {e}"


@pytest.mark.parametrize(
    "handler",
    ["custom text", lambda e: f"custom: {e}"],
    ids=["str", "callable"],
)
def test_node_handle_tool_errors_text(way: Run, handler: Any) -> None:
    s = Scenario(
        [explode],
        [tool_call("explode", {"city": "Oslo"}, id="c1")],
        node_kwargs={"handle_tool_errors": handler},
    )
    assert assert_parity(s, way)[0] == "ok"


@pytest.mark.parametrize(
    "handler", [(KeyError,), KeyError, _on_key_error], ids=["tuple", "type", "typed-callable"]
)
def test_node_handle_tool_errors_unhandled_types_raise(way: Run, handler: Any) -> None:
    s = Scenario(
        [explode],
        [tool_call("explode", {"city": "Oslo"}, id="c1")],
        node_kwargs={"handle_tool_errors": handler},
    )
    assert assert_parity(s, way)[:2] == ("raised", "ValueError")


# -- stream events ----------------------------------------------------------------


def _custom_events(cls: type[ToolNode], mode: str) -> list[Any]:
    compiled = tools_graph(cls([streamer, astreamer]), MessagesState)
    calls = [  # two sync calls: a step of several calls runs them on worker threads
        tool_call("streamer", {"text": "Ab"}, id="c1"),
        tool_call("streamer", {"text": "Xy"}, id="c3"),
    ]
    if mode == "async":
        calls.append(tool_call("astreamer", {"text": "Cd"}, id="c2"))
    return _custom_stream(compiled, {"messages": [AIMessage("", tool_calls=calls)]}, mode)


def _custom_stream(graph: Any, payload: Any, mode: str) -> list[Any]:
    """The ``stream_mode="custom"`` events of one run of `graph`, sync or async."""
    if mode == "sync":
        return list(graph.stream(payload, stream_mode="custom"))

    async def collect() -> list[Any]:
        return [e async for e in graph.astream(payload, stream_mode="custom")]

    return asyncio.run(collect())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_custom_stream_events(mode: str) -> None:
    expected = _custom_events(ToolNode, mode)
    assert expected  # the reference does emit them
    assert sorted(map(repr, _custom_events(ResilientToolNode, mode))) == sorted(map(repr, expected))


def _agent_events(middleware: list[Any], tools: list[Any], mode: str) -> list[Any]:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from langchain_resilient_tools.testing import ScriptedChatModel

    calls = [tool_call(t.name, {"text": f"t{i}"}, id=f"c{i}") for i, t in enumerate(tools)]
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=calls), AIMessage("done")])
    agent = create_agent(model, tools, middleware=middleware)
    return _custom_stream(agent, {"messages": [HumanMessage("go")]}, mode)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_custom_stream_events_through_the_middleware_and_the_wrapper(mode: str) -> None:
    from langchain_resilient_tools import ResilientTool, ResilientToolsMiddleware

    tools: list[Any] = [streamer, streamer.model_copy(update={"name": "streamer2"})]
    if mode == "async":
        tools.append(astreamer)
    expected = sorted(map(repr, _agent_events([], tools, mode)))
    assert expected
    with_middleware = _agent_events([ResilientToolsMiddleware()], tools, mode)
    wrapped = _agent_events([], [ResilientTool.wrap(t) for t in tools], mode)
    assert sorted(map(repr, with_middleware)) == expected
    assert sorted(map(repr, wrapped)) == expected


def _agent_outcome(middleware: list[Any], bug: BaseTool, mode: str) -> tuple[str, str]:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from langchain_resilient_tools.testing import ScriptedChatModel

    call = tool_call(bug.name, {"n": 1}, id="c1")
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[call]), AIMessage("done")])
    agent = create_agent(model, [bug], middleware=middleware)
    payload = {"messages": [HumanMessage("go")]}
    try:
        if mode == "sync":
            agent.invoke(payload)
        else:
            asyncio.run(agent.ainvoke(payload))
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "ok", ""


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("bug", [no_answer, wrong_id], ids=lambda t: t.name)
def test_a_wiring_bug_under_create_agent_raises_with_the_middleware_too(
    bug: BaseTool, mode: str
) -> None:
    """`create_agent`'s ToolNode raises a tool's invalid `Command` (its default error
    handling); the middleware does not turn it into an answer."""
    from langchain_resilient_tools import ResilientToolsMiddleware

    expected = _agent_outcome([], bug, mode)
    assert expected[0] == "ValueError"
    assert _agent_outcome([ResilientToolsMiddleware()], bug, mode) == expected
