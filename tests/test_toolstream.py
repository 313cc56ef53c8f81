"""LangGraph's ``tools`` stream through the layer: one handle per tool call id.

Driven with ``stream_events(version="v3")`` (the `ToolCallStream` handles of
``run.tool_calls``) and with ``stream(stream_mode="tools")`` (the raw events a wire
client reads), through every adapter, sync and async: a call retried twice, a hedged
read, a call answered with the error envelope, a call refused before it ran.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import ToolCallTransformer, ToolRuntime

from langchain_resilient_tools import (
    Hedge,
    ResilientToolNode,
    RetryPolicy,
    ToolPolicy,
)
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import _LOOPS, Harness
from tests.support.answers import by_id
from tests.support.graphs import tools_graph
from tests.test_hedge import Releases, releases, stalling_read  # noqa: F401 - the fixture
from tests.tools import CALLS, failing_tool, flaky_tool, ok_tool

pytestmark = pytest.mark.filterwarnings(
    "ignore:The v3 streaming protocol:langchain_core._api.beta_decorator.LangChainBetaWarning"
)

RETRY3 = ToolPolicy(retry=RetryPolicy(max_attempts=3))


def loop_run(harness: Harness, coro: Any) -> Any:
    """Run `coro` on the harness's event loop (as `Harness.invoke` runs a graph)."""
    if harness.loop is None or harness.loop.is_closed():
        harness.loop = asyncio.new_event_loop()
        _LOOPS.append(harness.loop)
    return harness.loop.run_until_complete(coro)


def _payload(harness: Harness, calls: Sequence[dict[str, Any]]) -> tuple[Any, AIMessage]:
    ai = AIMessage("", tool_calls=list(calls))
    if harness.adapter == "middleware":
        return {"messages": [HumanMessage("go")]}, ai
    return {"messages": [ai]}, ai


def handles(
    harness: Harness, tools: Sequence[BaseTool], calls: Sequence[dict[str, Any]], **build: Any
) -> tuple[list[Any], dict[str, ToolMessage]]:
    """The `ToolCallStream`s of one ``stream_events(version="v3")`` run (their deltas
    read), and the ToolMessages the model got, by call id."""
    payload, ai = _payload(harness, calls)
    graph = harness.build(tools, ai=ai, **build)
    # create_agent registers the transformer itself; a plain graph is given it per run.
    extra = [] if harness.adapter == "middleware" else [ToolCallTransformer]
    found: list[Any] = []
    if harness.mode == "sync":
        run = graph.stream_events(payload, version="v3", transformers=extra)
        for tc in run.tool_calls:
            list(tc.output_deltas)
            found.append(tc)
        state = run.output
    else:

        async def drive() -> Any:
            run = await graph.astream_events(payload, version="v3", transformers=extra)
            async for tc in run.tool_calls:
                [d async for d in tc.output_deltas]
                found.append(tc)
            return await run.output()

        state = loop_run(harness, drive())
    answers = by_id(state["messages"])
    return found, answers


def raw_events(
    harness: Harness, tools: Sequence[BaseTool], calls: Sequence[dict[str, Any]], **build: Any
) -> list[tuple[str, str]]:
    """``(event, tool_call_id)`` of the ``tools`` stream mode of one run."""
    payload, ai = _payload(harness, calls)
    graph = harness.build(tools, ai=ai, **build)
    kw: dict[str, Any] = {"stream_mode": ["tools"], "subgraphs": True}
    if harness.mode == "sync":
        chunks = list(graph.stream(payload, **kw))
    else:

        async def drive() -> list[Any]:
            return [c async for c in graph.astream(payload, **kw)]

        chunks = loop_run(harness, drive())
    return [(p["event"], p["tool_call_id"]) for _ns, mode, p in chunks if mode == "tools"]


def one_handle(found: list[Any], call_id: str = "c1") -> Any:
    assert [tc.tool_call_id for tc in found] == [call_id]
    tc = found[0]
    assert tc.completed
    return tc


# -- retries ------------------------------------------------------------------------


def test_a_call_retried_twice_is_one_handle_that_finishes(harness: Harness) -> None:
    call = tool_call("search_docs", {"query": "q"}, id="c1")
    found, answers = handles(harness, [flaky_tool("search_docs", 2)], [call], policy=RETRY3)
    tc = one_handle(found)
    assert CALLS["search_docs"] == 3  # three runs of the tool ...
    assert (tc.tool_name, tc.input) == ("search_docs", {"query": "q"})
    assert tc.error is None and tc.output == "result for q"  # ... one handle, finished
    assert answers["c1"].content == "result for q"
    CALLS.clear()
    events = raw_events(harness, [flaky_tool("search_docs", 2)], [call], policy=RETRY3)
    assert events == [("tool-started", "c1"), ("tool-finished", "c1")]
    assert CALLS["search_docs"] == 3


def test_an_enveloped_failure_ends_with_tool_error(harness: Harness) -> None:
    """The stream's `error` holds the envelope's summary (redacted: the exception's own
    text never reaches it); the model reads the envelope."""
    tool = failing_tool("search_docs", ConnectionError("down, password=hunter2"))
    call = tool_call("search_docs", {"query": "q"}, id="c1")
    found, answers = handles(harness, [tool], [call], policy=RETRY3)
    tc = one_handle(found)
    assert CALLS["search_docs"] == 3
    assert tc.output is None
    assert tc.error is not None and tc.error.startswith("transient_failure: search_docs ")
    assert "hunter2" not in tc.error and "password" not in tc.error
    message = answers["c1"]
    assert message.status == "error"
    body = json.loads(str(message.content))
    assert body["error"] == "transient_failure" and body["attempts"] == 3
    assert tc.error == f"{body['error']}: {body['message']}"
    events = raw_events(harness, [tool], [call], policy=RETRY3)
    assert events == [("tool-started", "c1"), ("tool-error", "c1")]


def test_a_call_refused_before_it_ran_has_its_handle(harness: Harness) -> None:
    """Every call id the model gets an answer for has one handle, also one whose tool
    never ran (here its arguments do not fit: no tool run reported anything)."""
    calls = [
        tool_call("get_weather", {"city": "Oslo"}, id="ok"),
        tool_call("get_weather", {"town": 5, "zone": 1}, id="bad"),
    ]
    found, answers = handles(harness, [ok_tool()], calls)
    by_id = {tc.tool_call_id: tc for tc in found}
    assert sorted(by_id) == ["bad", "ok"] and len(found) == 2
    assert by_id["ok"].output == "sunny in Oslo" and by_id["ok"].error is None
    assert by_id["bad"].error is not None and by_id["bad"].error.startswith("invalid_arguments")
    assert by_id["bad"].input == {"town": 5, "zone": 1}  # what the model sent
    assert answers["bad"].status == "error"
    assert CALLS["get_weather"] == 1


# -- hedges -------------------------------------------------------------------------


def test_a_hedged_read_is_one_handle(harness: Harness, releases: Releases) -> None:  # noqa: F811
    clock = FakeClock()
    hedge = Hedge(delay=0.5, budget=1.0)  # a token with the first call: the budget starts empty
    policy = ToolPolicy(hedge=hedge, clock=clock, dedup="off")
    tool = stalling_read("search_docs", clock, releases, native_async=True)
    call = tool_call("search_docs", {"query": "q"}, id="c1")
    found, answers = handles(harness, [tool], [call], policy=policy)
    tc = one_handle(found)
    assert tc.error is None and tc.output == "fresh q"
    record = answers["c1"].response_metadata["resilience"]
    assert record["hedges"] == 1 and record["hedge_won"] is True
    assert CALLS["search_docs"] == 2  # two runs of the tool, side by side
    tool = stalling_read("search_docs", clock, releases, native_async=True)
    events = raw_events(harness, [tool], [call], policy=policy)
    assert events == [("tool-started", "c1"), ("tool-finished", "c1")]


# -- what reaches the handle ---------------------------------------------------------


def _deltas_tool() -> BaseTool:
    """Streams a chunk per run; its first run then fails."""
    runs = {"n": 0}

    def search_docs(query: str, runtime: ToolRuntime) -> str:
        runs["n"] += 1
        runtime.emit_output_delta(f"run {runs['n']}")
        if runs["n"] == 1:
            raise ConnectionError("reset")
        return f"result for {query}"

    return StructuredTool.from_function(search_docs, description="Search the docs.")


def test_output_deltas_of_every_attempt_reach_the_one_handle() -> None:
    node = ResilientToolNode([_deltas_tool()], policy=RETRY3)
    graph = tools_graph(node)
    ai = AIMessage("", tool_calls=[tool_call("search_docs", {"query": "q"}, id="c1")])
    run = graph.stream_events({"messages": [ai]}, version="v3", transformers=[ToolCallTransformer])
    seen = [(tc, list(tc.output_deltas)) for tc in run.tool_calls]
    assert [(tc.tool_call_id, deltas) for tc, deltas in seen] == [("c1", ["run 1", "run 2"])]
    assert seen[0][0].output == "result for q"


def test_tools_a_tool_runs_itself_still_stream() -> None:
    """Only the runs of the call's own id are kept off the stream: a tool that runs
    another tool (a sub-agent's) leaves that run's events on it."""
    inner = ok_tool("lookup")

    def search_docs(query: str, runtime: ToolRuntime) -> str:
        inner.invoke(tool_call("lookup", {"city": query}, id="nested"), runtime.config)
        return f"result for {query}"

    tool = StructuredTool.from_function(search_docs, description="Search the docs.")
    node = ResilientToolNode([tool])
    graph = tools_graph(node)
    ai = AIMessage("", tool_calls=[tool_call("search_docs", {"query": "q"}, id="c1")])
    chunks = graph.stream({"messages": [ai]}, stream_mode=["tools"], subgraphs=True)
    events = [(p["event"], p["tool_call_id"]) for _ns, _mode, p in chunks]
    assert events == [
        ("tool-started", "c1"),
        ("tool-started", "nested"),
        ("tool-finished", "nested"),
        ("tool-finished", "c1"),
    ]


def test_without_a_tools_stream_the_config_is_left_alone() -> None:
    """No stream handler in the run: the call's config is not touched."""
    seen: list[Any] = []

    def search_docs(query: str, runtime: ToolRuntime) -> str:
        seen.append(runtime.config.get("callbacks"))
        return query

    tool = StructuredTool.from_function(search_docs, description="Search the docs.")
    node = ResilientToolNode([tool])
    ai = AIMessage("", tool_calls=[tool_call("search_docs", {"query": "q"}, id="c1")])
    tools_graph(node).invoke({"messages": [ai]})
    assert len(seen) == 1
    assert "CallStream" not in {type(h).__name__ for h in getattr(seen[0], "handlers", [])}
