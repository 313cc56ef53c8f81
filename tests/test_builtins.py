"""Ours beside LangChain's and LangGraph's own layers (issue 35.2).

Each built-in is stacked with ours through `create_agent` (a scripted model, real
middleware) or a `StateGraph`, in both orders where the order matters:

- `ToolRetryMiddleware`: outside ours it has nothing to retry (we never raise for a
  tool's failure); inside ours it would run a write again where we cannot see it (retry
  multiplication), so a write it covers is refused and reads are warned about once;
- `ToolErrorMiddleware`: outside ours it never sees an exception (the model gets our
  envelope); inside, it hides exceptions from us (said once);
- `HumanInTheLoopMiddleware`: a write runs once, after approval, in either order and
  either interrupt mode, through the write journal;
- `ToolCallLimitMiddleware`: counts the calls the model asked for; calls it blocks are
  answered once, by it, and never run; the rest keep our rules (twins, malformed calls);
- `ModelFallbackMiddleware`: a model-level layer, independent of ours;
- a node's ``timeout=`` / ``retry_policy=`` around a `ResilientToolNode` (async only, as
  LangGraph allows): our per-call timeouts answer inside it; a node retry does not run a
  write again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelFallbackMiddleware,
    ToolCallLimitMiddleware,
    ToolErrorMiddleware,
    ToolRetryMiddleware,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import NodeTimeoutError
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, RetryPolicy, TimeoutPolicy

from langchain_resilient_tools import (
    ResilientTool,
    ResilientToolNode,
    ResilientToolsMiddleware,
    ToolPolicy,
)
from langchain_resilient_tools.adapters.layers import Layers, inner_layers
from langchain_resilient_tools.core.errors import UsageError
from langchain_resilient_tools.testing import ScriptedChatModel, invalid_call, tool_call
from tests.support.answers import envelope
from tests.support.graphs import tools_graph

LAYERS_LOG = "langchain_resilient_tools.adapters.layers"
SECRET = "password=hunter2"


class Service:
    """A fake order service and a quote service, counting every execution."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.sent: list[dict[str, Any]] = []
        self.quote_failures = 0
        self.reset_after_sending = False

    def tools(self) -> list[BaseTool]:
        def create_order(item: str) -> str:
            """Create an order."""
            self.runs["create_order"] += 1
            self.sent.append({"item": item})
            if self.reset_after_sending:
                raise ConnectionResetError(f"connection reset by peer ({SECRET})")
            return f"order for {item}"

        def get_quote(item: str) -> str:
            """Read the price of an item."""
            self.runs["get_quote"] += 1
            if self.runs["get_quote"] <= self.quote_failures:
                raise ConnectionError(f"quote service unavailable ({SECRET})")
            return f"{item}: 3 EUR"

        async def acreate_order(item: str) -> str:
            return create_order(item)

        async def aget_quote(item: str) -> str:
            return get_quote(item)

        return [
            StructuredTool.from_function(func=create_order, coroutine=acreate_order),
            StructuredTool.from_function(func=get_quote, coroutine=aget_quote),
        ]


def turn(*calls: dict[str, Any], invalid: Sequence[dict[str, Any]] = ()) -> list[AIMessage]:
    """The model's script: one turn of tool calls, then a final answer."""
    return [
        AIMessage("", tool_calls=list(calls), invalid_tool_calls=list(invalid)),
        AIMessage("done"),
    ]


def agent(service: Service, middleware: Sequence[Any], script: list[AIMessage], **kw: Any) -> Any:
    return create_agent(
        ScriptedChatModel(script=script), tools=service.tools(), middleware=list(middleware), **kw
    )


def invoke(graph: Any, payload: Any, mode: str, config: Any = None) -> Any:
    if mode == "sync":
        return graph.invoke(payload, config)
    return asyncio.run(graph.ainvoke(payload, config))


def answers(state: dict[str, Any]) -> dict[str, ToolMessage]:
    found = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    ids = Counter(m.tool_call_id for m in found)
    assert set(ids.values()) == {1}, f"answered more than once: {ids}"  # invariant 1
    return {m.tool_call_id: m for m in found}


MODES = ("sync", "async")
ORDER = "create_order"


# -- ToolRetryMiddleware: retry multiplication ---------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_unguarded_retry_inside_ours_sends_a_write_three_times(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the guard prevents (measured before it existed): `ToolRetryMiddleware` after
    ours in the list runs inside our ``wrap_tool_call`` and re-runs the write itself."""
    monkeypatch.setattr(Layers, "guard", lambda *a, **k: None)
    service = Service()
    service.reset_after_sending = True
    mw = [ResilientToolsMiddleware(), ToolRetryMiddleware(initial_delay=0, jitter=False)]
    state = invoke(
        agent(service, mw, turn(tool_call(ORDER, {"item": "tea"}, id="w"))),
        {"messages": [HumanMessage("go")]},
        mode,
    )
    assert service.runs[ORDER] == 3  # one requested call, three orders
    assert "failed after 3 attempts" in str(answers(state)["w"].content)


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_inside_ours_is_refused_before_any_write_runs(mode: str) -> None:
    service = Service()
    service.reset_after_sending = True
    mw = [ResilientToolsMiddleware(), ToolRetryMiddleware(initial_delay=0, jitter=False)]
    # The first call is a read: the refusal comes at the agent's first tool call all the
    # same (a write of the agent is covered), before anything ran.
    graph = agent(service, mw, turn(tool_call("get_quote", {"item": "tea"}, id="r")))
    with pytest.raises(UsageError) as info:
        invoke(graph, {"messages": [HumanMessage("go")]}, mode)
    text = str(info.value)
    assert "ToolRetryMiddleware" in text and "ResilientToolsMiddleware" in text
    assert "create_order" in text and "get_quote" not in text.split("would run")[0]
    assert "before ResilientToolsMiddleware" in text  # the fix
    assert service.runs == Counter()


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_outside_ours_runs_a_write_once_and_passes_our_answer(mode: str) -> None:
    service = Service()
    service.reset_after_sending = True
    mw = [ToolRetryMiddleware(initial_delay=0, jitter=False), ResilientToolsMiddleware()]
    state = invoke(
        agent(service, mw, turn(tool_call(ORDER, {"item": "tea"}, id="w"))),
        {"messages": [HumanMessage("go")]},
        mode,
    )
    assert service.runs[ORDER] == 1
    body = envelope(answers(state)["w"])
    assert body["error"] == "unknown_outcome" and body["attempts"] == 1
    assert SECRET not in json.dumps(body)
    assert [r["tool_call_id"] for r in state["tool_errors"]] == ["w"]


@pytest.mark.parametrize("mode", MODES)
def test_a_retry_inside_ours_limited_to_reads_is_said_once(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = Service()
    mw = [
        ResilientToolsMiddleware(),
        ToolRetryMiddleware(tools=["get_quote"], initial_delay=0, jitter=False),
    ]
    script = [
        AIMessage("", tool_calls=[tool_call("get_quote", {"item": "tea"}, id="r1")]),
        AIMessage("", tool_calls=[tool_call("get_quote", {"item": "milk"}, id="r2"),
                                  tool_call(ORDER, {"item": "tea"}, id="w")]),
        AIMessage("done"),
    ]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger=LAYERS_LOG):
        state = invoke(agent(service, mw, script), {"messages": [HumanMessage("go")]}, mode)
    said = [r.getMessage() for r in caplog.records if r.name == LAYERS_LOG]
    assert len(said) == 1, said
    assert "ToolRetryMiddleware sits inside ResilientToolsMiddleware" in said[0]
    assert "get_quote" in said[0] and "retry multiplication" in said[0]
    assert {k: m.status for k, m in answers(state).items()} == {
        "r1": "success", "r2": "success", "w": "success"
    }  # fmt: skip
    assert service.runs == Counter({"get_quote": 2, ORDER: 1})


@pytest.mark.parametrize("mode", MODES)
def test_a_wrapped_tool_under_a_retry_layer_sends_a_write_once(mode: str) -> None:
    """`ResilientTool.wrap` answers a failure instead of raising it, so a retry layer
    around the wrapped tool (here `ToolNode`'s ``wrap_tool_call``) has nothing to retry."""
    service = Service()
    service.reset_after_sending = True
    retry = ToolRetryMiddleware(initial_delay=0, jitter=False)
    wrapped = [ResilientTool.wrap(t) for t in service.tools()]
    node = ToolNode(
        wrapped, wrap_tool_call=retry.wrap_tool_call, awrap_tool_call=retry.awrap_tool_call
    )
    payload = {"messages": [AIMessage("", tool_calls=[tool_call(ORDER, {"item": "tea"}, id="w")])]}
    state = invoke(_graph(node), payload, mode)
    assert service.runs[ORDER] == 1
    assert envelope(answers(state)["w"])["error"] == "unknown_outcome"


def test_an_inner_retry_without_retries_is_not_a_retry_layer() -> None:
    service = Service()
    service.reset_after_sending = True
    mw = [ResilientToolsMiddleware(), ToolRetryMiddleware(max_retries=0)]
    state = invoke(
        agent(service, mw, turn(tool_call(ORDER, {"item": "tea"}, id="w"))),
        {"messages": [HumanMessage("go")]},
        "sync",
    )
    assert service.runs[ORDER] == 1
    assert answers(state)["w"].status == "error"


def test_a_retry_in_a_nodes_wrapper_is_refused_at_construction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    retry = ToolRetryMiddleware(initial_delay=0)
    with pytest.raises(UsageError, match=r"ToolRetryMiddleware sits inside ResilientToolNode"):
        ResilientToolNode(Service().tools(), wrap_tool_call=retry.wrap_tool_call)
    with pytest.raises(UsageError, match="create_order"):
        ResilientToolNode(Service().tools(), awrap_tool_call=retry.awrap_tool_call)
    # An explicit idempotent=True makes the write safe to repeat: reads only, said once.
    with caplog.at_level(logging.WARNING, logger=LAYERS_LOG):
        ResilientToolNode(
            Service().tools(),
            policies={ORDER: ToolPolicy(idempotent=True)},
            wrap_tool_call=retry.wrap_tool_call,
        )
        errors = ToolErrorMiddleware(lambda e, r: "failed")
        ResilientToolNode(Service().tools(), wrap_tool_call=errors.wrap_tool_call)
    said = [r.getMessage() for r in caplog.records if r.name == LAYERS_LOG]
    assert len(said) == 2
    assert said[0].startswith("ToolRetryMiddleware sits inside ResilientToolNode")
    assert "create_order, get_quote" in said[0]
    assert said[1].startswith("ToolErrorMiddleware sits inside ResilientToolNode")
    assert "Drop it from the node's wrap_tool_call" in said[1]


def test_the_layers_inside_are_found_through_the_chain_create_agent_builds() -> None:
    """`inner_layers` walks the handler `create_agent` hands a middleware: every
    middleware after it in the list, none before it, not itself."""
    found: list[list[str]] = []
    retry, errors = ToolRetryMiddleware(), ToolErrorMiddleware(lambda e, r: "failed")

    class Probe(ResilientToolsMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            found.append([type(m).__name__ for m in inner_layers(handler, skip=self)])
            return handler(request)

    service = Service()
    graph = agent(
        service, [errors, Probe(), retry], turn(tool_call("get_quote", {"item": "a"}, id="r"))
    )
    graph.invoke({"messages": [HumanMessage("go")]})
    assert found == [["ToolRetryMiddleware"]]


# -- ToolErrorMiddleware ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_error_layer_outside_ours_sees_our_envelopes_not_exceptions(mode: str) -> None:
    seen: list[str] = []

    def on_error(exc: Exception, request: Any) -> str:
        seen.append(type(exc).__name__)
        return f"{request.tool_call['name']} failed: {exc}"

    service = Service()
    service.quote_failures = 5  # more than our attempts
    service.reset_after_sending = True
    mw = [ToolErrorMiddleware(on_error), ResilientToolsMiddleware()]
    calls = turn(
        tool_call("get_quote", {"item": "tea"}, id="r"), tool_call(ORDER, {"item": "tea"}, id="w")
    )
    state = invoke(agent(service, mw, calls), {"messages": [HumanMessage("go")]}, mode)
    assert seen == []
    got = answers(state)
    assert envelope(got["r"])["error"] == "transient_failure"
    assert envelope(got["w"])["error"] == "unknown_outcome"
    assert SECRET not in str(got["r"].content) + str(got["w"].content)
    assert service.runs == Counter({"get_quote": 3, ORDER: 1})  # our retry, reads only


@pytest.mark.parametrize("mode", MODES)
def test_an_error_layer_inside_ours_hides_exceptions_and_is_said_once(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = Service()
    service.quote_failures = 1
    mw = [ResilientToolsMiddleware(), ToolErrorMiddleware(lambda e, r: type(e).__name__)]
    calls = turn(
        tool_call("get_quote", {"item": "a"}, id="r1"),
        tool_call("get_quote", {"item": "b"}, id="r2"),
    )
    with caplog.at_level(logging.WARNING, logger=LAYERS_LOG):
        state = invoke(agent(service, mw, calls), {"messages": [HumanMessage("go")]}, mode)
    said = [r.getMessage() for r in caplog.records if r.name == LAYERS_LOG]
    assert len(said) == 1 and "ToolErrorMiddleware sits inside ResilientToolsMiddleware" in said[0]
    # What it says happens: the first read's transient failure was not retried.
    statuses = sorted(m.status for m in answers(state).values())
    assert statuses == ["error", "success"]
    assert service.runs["get_quote"] == 2


# -- HumanInTheLoopMiddleware and the write journal ---------------------------------------


def _decision(kind: str) -> dict[str, Any]:
    if kind == "reject":
        return {"type": "reject", "message": "not today"}
    if kind == "edit":
        return {"type": "edit", "edited_action": {"name": ORDER, "args": {"item": "milk"}}}
    return {"type": "approve"}


@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-outer", "hitl-outer"])
@pytest.mark.parametrize("decision", ["approve", "reject", "edit"])
def test_approval_before_a_write_runs_it_once_in_either_order(
    interrupt_mode: str, ours_first: bool, decision: str
) -> None:
    service = Service()
    hitl = HumanInTheLoopMiddleware(interrupt_on={ORDER: True}, interrupt_mode=interrupt_mode)
    mw = [ResilientToolsMiddleware(), hitl] if ours_first else [hitl, ResilientToolsMiddleware()]
    calls = turn(
        tool_call(ORDER, {"item": "tea"}, id="w"), tool_call("get_quote", {"item": "tea"}, id="r")
    )
    graph = agent(service, mw, calls, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"hitl-{interrupt_mode}-{ours_first}-{decision}"}}
    first = graph.invoke({"messages": [HumanMessage("go")]}, config)
    pending = first["__interrupt__"]
    assert service.runs[ORDER] == 0  # nothing written before the person decided
    if interrupt_mode == "batched":
        resume: Any = {"decisions": [_decision(decision)]}
    else:
        resume = {i.id: _decision(decision) for i in pending}
    state = graph.invoke(Command(resume=resume), config)
    assert "__interrupt__" not in state
    got = answers(state)
    assert got["r"].status == "success"
    if decision == "reject":
        assert service.runs[ORDER] == 0 and got["w"].status == "error"
        assert "not today" in str(got["w"].content)
    else:
        item = "milk" if decision == "edit" else "tea"
        assert service.sent == [{"item": item}]  # once, with what the person approved
        assert got["w"].status == "success" and f"order for {item}" in str(got["w"].content)
    # Resuming the finished thread again does not write again.
    graph.invoke(Command(resume=resume), config)
    assert service.runs[ORDER] == (0 if decision == "reject" else 1)


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-outer", "hitl-outer"])
def test_an_approved_write_that_resets_after_sending_is_an_unknown_outcome_once(
    ours_first: bool,
) -> None:
    service = Service()
    service.reset_after_sending = True
    hitl = HumanInTheLoopMiddleware(interrupt_on={ORDER: True}, interrupt_mode="per_call")
    mw = [ResilientToolsMiddleware(), hitl] if ours_first else [hitl, ResilientToolsMiddleware()]
    graph = agent(
        service, mw, turn(tool_call(ORDER, {"item": "tea"}, id="w")), checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": f"reset-{ours_first}"}}
    pending = graph.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    state = graph.invoke(Command(resume={i.id: {"type": "approve"} for i in pending}), config)
    assert service.runs[ORDER] == 1
    assert envelope(answers(state)["w"])["error"] == "unknown_outcome"


# -- ToolCallLimitMiddleware --------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-outer", "limit-outer"])
def test_a_call_limit_counts_what_the_model_asked_and_our_rules_hold_for_the_rest(
    mode: str, ours_first: bool
) -> None:
    """Two identical reads (twins: one execution), a third over the limit (answered by
    the limit, never run) and a call the model could not format (answered by us)."""
    service = Service()
    limit = ToolCallLimitMiddleware(run_limit=2)
    mw = [ResilientToolsMiddleware(), limit] if ours_first else [limit, ResilientToolsMiddleware()]
    script = turn(
        tool_call("get_quote", {"item": "tea"}, id="a"),
        tool_call("get_quote", {"item": "tea"}, id="b"),
        tool_call("get_quote", {"item": "milk"}, id="c"),
        invalid=[invalid_call("get_quote", '{"item": "', id="bad")],
    )
    state = invoke(agent(service, mw, script), {"messages": [HumanMessage("go")]}, mode)
    got = answers(state)
    assert set(got) == {"a", "b", "c", "bad"}
    assert service.runs["get_quote"] == 1  # the twins ran once; the blocked call never
    assert "limit" in str(got["c"].content).lower() and got["c"].status == "error"
    assert envelope(got["bad"])["error"] == "malformed_call"
    assert got["a"].status == got["b"].status == "success"


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-outer", "limit-outer"])
def test_a_call_limit_before_ours_counts_the_calls_we_repaired(ours_first: bool) -> None:
    """A call the model could not format but we could repair runs like any other. The
    limit counts it only when its after_model runs after ours, i.e. when the limit
    comes first in the list (after_model hooks run last-to-first); after ours it escapes
    the count (the docs say: put ToolCallLimitMiddleware before ours)."""
    service = Service()
    limit = ToolCallLimitMiddleware(run_limit=1)
    mw = [ResilientToolsMiddleware(), limit] if ours_first else [limit, ResilientToolsMiddleware()]
    script = turn(
        tool_call("get_quote", {"item": "tea"}, id="a"),
        invalid=[invalid_call("get_quote", "{'item': 'milk',}", id="fixed")],
    )
    state = invoke(agent(service, mw, script), {"messages": [HumanMessage("go")]}, "sync")
    got = answers(state)
    assert got["a"].content == "tea: 3 EUR"
    if ours_first:
        assert service.runs["get_quote"] == 2 and str(got["fixed"].content).endswith("milk: 3 EUR")
    else:
        assert service.runs["get_quote"] == 1 and "limit" in str(got["fixed"].content).lower()


# -- ModelFallbackMiddleware --------------------------------------------------------------


class _Down(ScriptedChatModel):
    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("primary model down")


def test_a_model_fallback_hands_its_calls_to_ours() -> None:
    service = Service()
    service.reset_after_sending = True
    backup = ScriptedChatModel(script=turn(tool_call(ORDER, {"item": "tea"}, id="w")))
    mw = [ModelFallbackMiddleware(backup), ResilientToolsMiddleware()]
    graph = create_agent(_Down(script=[AIMessage("never")]), tools=service.tools(), middleware=mw)
    state = graph.invoke({"messages": [HumanMessage("go")]})
    assert envelope(answers(state)["w"])["error"] == "unknown_outcome"
    assert service.runs[ORDER] == 1


# -- a node's timeout= and retry_policy= around a ResilientToolNode -----------------------


class Hang:
    """An async tool that hangs (until a timeout cancels it), counting executions."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runs = 0

    def tool(self) -> BaseTool:
        async def hang(item: str) -> str:
            self.runs += 1
            await asyncio.sleep(5)
            return "late"

        return StructuredTool.from_function(coroutine=hang, name=self.name, description="Hangs.")


def _graph(node: Any, checkpointer: Any = None, **node_kw: Any) -> Any:
    return tools_graph(node, node_kw=node_kw, checkpointer=checkpointer)


async def test_our_timeouts_answer_inside_a_node_timeout() -> None:
    """Our call deadline (by default 2 x timeout + 1 s) below the node's ``timeout=``:
    the hung call is answered, its sibling keeps its result, the node never times out.
    Only the hung tool has the short timeout: the sibling need not be quick."""
    hang, service = Hang("get_stock"), Service()
    policies = {"get_stock": ToolPolicy(timeout=0.05)}
    node = ResilientToolNode([hang.tool(), *service.tools()], policies=policies)
    calls = [
        tool_call("get_stock", {"item": "tea"}, id="h"),
        tool_call(ORDER, {"item": "tea"}, id="w"),
    ]
    state = await _graph(node, timeout=10.0).ainvoke(
        {"messages": [AIMessage("", tool_calls=calls)]}
    )
    got = answers(state)
    assert envelope(got["h"])["error"] == "timeout"
    assert got["w"].content == "order for tea"
    assert service.runs[ORDER] == 1


async def test_a_node_timeout_fails_the_whole_toolnode() -> None:
    """LangGraph's node timeout cancels the node: around a `ToolNode` the finished
    sibling's answer is lost with it."""
    hang, service = Hang("get_stock"), Service()
    node = ToolNode([hang.tool(), *service.tools()])
    calls = [
        tool_call("get_stock", {"item": "tea"}, id="h"),
        tool_call(ORDER, {"item": "tea"}, id="w"),
    ]
    with pytest.raises(NodeTimeoutError):
        await _graph(node, timeout=0.2).ainvoke({"messages": [AIMessage("", tool_calls=calls)]})
    assert service.runs[ORDER] == 1  # it ran; only the node's answer was lost


@pytest.mark.realtime
async def test_a_node_timeout_shorter_than_ours_is_kept_by_ours() -> None:
    """A node timeout (2 s) shorter than our call deadline (7 s): each call's deadline
    follows the node's, so the hung call is answered in time and its sibling keeps its
    result; the node never times out (`tests/test_node_timeouts.py` has the rest)."""
    hang, service = Hang("get_stock"), Service()
    node = ResilientToolNode([hang.tool(), *service.tools()], policy=ToolPolicy(timeout=3.0))
    calls = [
        tool_call("get_stock", {"item": "tea"}, id="h"),
        tool_call(ORDER, {"item": "tea"}, id="w"),
    ]
    state = await _graph(node, timeout=2.0).ainvoke({"messages": [AIMessage("", tool_calls=calls)]})
    got = answers(state)
    assert envelope(got["h"])["step_time_limit_s"] == 2.0
    assert got["w"].content == "order for tea"
    assert service.runs[ORDER] == 1


@pytest.mark.parametrize("checkpointer", [None, "memory"])
async def test_a_node_retry_after_its_timeout_does_not_send_a_write_again(
    checkpointer: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """``timeout=`` plus ``retry_policy=`` re-runs the whole step: `ToolNode` sends both
    writes again on every node attempt. Ours answers within a node's run timeout (no
    re-run, above); re-run all the same (here: an idle timeout over a write with no
    deadline of ours, which no heartbeat vouches for), it answers the finished write
    from the ledger and the cut-off one as an unknown outcome, each sent once."""
    retry = RetryPolicy(max_attempts=3, initial_interval=0.01, jitter=False)
    saver = InMemorySaver() if checkpointer else None
    config = {"configurable": {"thread_id": "node-retry"}}
    calls = [
        tool_call("create_slow", {"item": "tea"}, id="s"),
        tool_call(ORDER, {"item": "tea"}, id="w"),
    ]
    payload = {"messages": [AIMessage("", tool_calls=calls)]}

    hang, service = Hang("create_slow"), Service()
    base = _graph(ToolNode([hang.tool(), *service.tools()]), saver, timeout=0.2, retry_policy=retry)
    with pytest.raises(NodeTimeoutError):
        await base.ainvoke(payload, config)
    assert (hang.runs, service.runs[ORDER]) == (3, 3)  # ToolNode: every write, three times

    hang, service = Hang("create_slow"), Service()
    node = ResilientToolNode([hang.tool(), *service.tools()], policy=ToolPolicy(timeout=None))
    idle = TimeoutPolicy(idle_timeout=0.2)
    ours = _graph(node, saver, timeout=idle, retry_policy=retry)
    with caplog.at_level(logging.WARNING, logger=LAYERS_LOG):
        state = await ours.ainvoke(payload, config)
    assert (hang.runs, service.runs[ORDER]) == (1, 1)
    got = answers(state)
    assert envelope(got["s"])["error"] == "unknown_outcome"
    assert str(got["w"].content).endswith("order for tea")  # with the journal, marked
    said = [r.getMessage() for r in caplog.records if r.name == LAYERS_LOG]
    assert len(said) == 1 and "ran node 'tools' again (attempt 2" in said[0]


def test_the_docs_page_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    """Every Python block of docs/builtins.md, each on its own."""
    import re
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "builtins.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/builtins.md block {i}", "exec"), {"__name__": f"block{i}"})
    assert "ToolRetryMiddleware sits inside ResilientToolsMiddleware" in capsys.readouterr().out
