"""``trace_policy``: what the traces, the callbacks and the model get, per setting.

Traces are read where LangSmith would get them: a LangSmith `Client` whose two posting
methods keep the runs in memory (no network), under ``tracing_context``. Beside it, a
plain callback handler collects what every handler that is not a tracer sees.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import configure_trace_policy
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.tracers.langchain import wait_for_all_tracers
from langgraph.types import TracePolicy, omit_payload
from langsmith import Client
from langsmith.run_helpers import tracing_context

from langchain_resilient_tools import (
    ResilientToolNode,
    ResilientToolsMiddleware,
    UsageError,
)
from langchain_resilient_tools.observe.tracing import redact_payload, trace_policy
from langchain_resilient_tools.testing import ScriptedChatModel, tool_call
from tests.support.graphs import tools_graph

SECRET_ARG = "sk-live-zzzzzzzz1234567890abcd"
SECRET_OUT = "sk-live-abcdef1234567890abcdef"
HOOK = "ResilientToolsMiddleware"


@tool
def lookup_account(account: str, limit: int) -> str:
    """Look an account up."""
    return f"account {account}: {limit} rows, token={SECRET_OUT}"


CALL = tool_call(
    "lookup_account", {"account": f"acme api_key={SECRET_ARG}", "limit": "5"}, id="c1"
)  # a secret in an argument, and a limit the layer parses (a repair)


class Traces(Client):
    """LangSmith's client, keeping the runs it would post (by id) in memory."""

    def __init__(self) -> None:
        super().__init__(api_key="test", api_url="http://127.0.0.1:9", auto_batch_tracing=False)
        self.kept: dict[Any, dict[str, Any]] = {}

    def create_run(self, name: str, inputs: dict[str, Any], run_type: str, **kw: Any) -> None:
        self.kept.setdefault(kw.get("id"), {}).update(name=name, inputs=inputs)

    def update_run(self, run_id: Any, **kw: Any) -> None:
        self.kept.setdefault(run_id, {})["outputs"] = kw.get("outputs")

    def named(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.kept.values() if r.get("name") == name]


class Seen(BaseCallbackHandler):
    """What a callback handler that is not a tracer gets."""

    def __init__(self) -> None:
        self.chains: dict[str, list[Any]] = {}
        self.tools: list[Any] = []
        self.events: list[dict[str, Any]] = []

    def on_chain_start(self, serialized: Any, inputs: Any, **kw: Any) -> None:
        self.chains.setdefault(kw.get("name") or "", []).append(inputs)

    def on_tool_start(self, serialized: Any, input_str: str, **kw: Any) -> None:
        self.tools.append(kw.get("inputs"))

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kw: Any) -> None:
        if name == "resilience":
            self.events.append(data)


@pytest.fixture(autouse=True)
def no_process_policy() -> Iterator[None]:
    yield
    configure_trace_policy(None)


def run_agent(setting: Any, mode: str = "sync") -> tuple[Traces, Seen, ToolMessage]:
    traces, seen = Traces(), Seen()
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[CALL]), AIMessage("done")])
    agent = create_agent(
        model,
        tools=[lookup_account],
        middleware=[ResilientToolsMiddleware(trace_policy=setting)],
    )
    payload = {"messages": [HumanMessage("go")]}
    config: Any = {"callbacks": [seen]}
    with tracing_context(enabled=True, client=traces, project_name="test"):
        if mode == "sync":
            out = agent.invoke(payload, config)
        else:
            out = asyncio.run(agent.ainvoke(payload, config))
    wait_for_all_tracers()
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    return traces, seen, answer


def _has(value: Any, text: str) -> bool:
    return text in str(value)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("setting", [None, "full", "redact", "omit"])
def test_what_each_channel_gets(setting: Any, mode: str) -> None:
    traces, seen, answer = run_agent(setting, mode)
    wrap = traces.named(f"{HOOK}.{'a' if mode == 'async' else ''}wrap_tool_call")
    after = traces.named(f"{HOOK}.after_model")
    assert len(wrap) == 1 and len(after) == 2  # the spans are there in every setting
    span = wrap[0]
    if setting in (None, "full"):  # LangChain's default: everything
        assert _has(span["inputs"], SECRET_ARG) and _has(span["outputs"], SECRET_OUT)
        assert _has(after[0]["inputs"], SECRET_ARG)
    elif setting == "redact":  # every text redacted, the rest kept
        for recorded in (span["inputs"], span["outputs"], after[0]["inputs"]):
            assert not _has(recorded, SECRET_ARG) and not _has(recorded, SECRET_OUT)
            assert _has(recorded, "acme api_key=***")
        assert _has(span["outputs"], "token=***")
    else:  # omitted: the span and its timing, no payload
        assert span["inputs"] == {} and not span["outputs"]
        assert all(r["inputs"] == {} for r in after)
    # The tool's own run is no hook span: it records the raw values in every setting.
    (tool_run,) = traces.named("lookup_account")
    assert _has(tool_run["inputs"], SECRET_ARG) and _has(tool_run["outputs"], SECRET_OUT)
    # A handler that is not a tracer gets the real payloads, as LangGraph gives them.
    assert _has(seen.chains[f"{HOOK}.after_model"][0], SECRET_ARG)
    assert _has(seen.tools, SECRET_ARG)
    # The layer's own event carries no argument or result; "omit" drops the parsed value.
    (event,) = seen.events
    assert not _has(event, SECRET_ARG) and not _has(event, SECRET_OUT)
    if setting == "omit":
        assert event["repairs"] == ["parsed 'limit' as an integer"]
    else:
        assert event["repairs"] == ["parsed 'limit' value '5' as an integer"]
    # The model reads the same answer whatever the traces keep.
    assert _has(answer.content, SECRET_OUT) and answer.status == "success"


def test_the_default_follows_the_process_wide_policy_and_full_overrides_it() -> None:
    configure_trace_policy(TracePolicy(process_inputs=omit_payload))
    traces, _, _ = run_agent(None)
    assert traces.named(f"{HOOK}.wrap_tool_call")[0]["inputs"] == {}
    traces, _, _ = run_agent("full")
    assert _has(traces.named(f"{HOOK}.wrap_tool_call")[0]["inputs"], SECRET_ARG)


def test_a_trace_policy_of_ones_own_is_used_as_it_is() -> None:
    own = TracePolicy(process_inputs=lambda _v: {"kept": "nothing"})
    assert ResilientToolsMiddleware(trace_policy=own).trace_policy is own
    traces, _, _ = run_agent(own)
    assert traces.named(f"{HOOK}.wrap_tool_call")[0]["inputs"] == {"kept": "nothing"}


def test_a_setting_that_is_not_one_fails_at_construction() -> None:
    with pytest.raises(UsageError, match="Did you mean 'omit'"):
        ResilientToolsMiddleware(trace_policy="omitt")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="full, redact, omit"):
        trace_policy(True)  # type: ignore[arg-type]


def test_a_node_is_traced_by_langgraph_with_the_same_settings() -> None:
    """A `ResilientToolNode` has no hook spans: its run is the node's, whose policy is
    LangGraph's ``add_node(trace_policy=...)``; `trace_policy` gives it the same values."""
    graph = tools_graph(
        ResilientToolNode([lookup_account]), node_kw={"trace_policy": trace_policy("redact")}
    )
    traces = Traces()
    with tracing_context(enabled=True, client=traces, project_name="test"):
        out = graph.invoke({"messages": [AIMessage("", tool_calls=[CALL])]})
    wait_for_all_tracers()
    (node,) = traces.named("tools")
    assert not _has(node["inputs"], SECRET_ARG) and _has(node["inputs"], "acme api_key=***")
    assert not _has(node["outputs"], SECRET_OUT) and _has(node["outputs"], "token=***")
    assert _has(out["messages"][-1].content, SECRET_OUT)  # the model's answer is whole


def test_redact_payload_copies_and_masks() -> None:
    message = AIMessage(
        "see Bearer abc.def.ghi", tool_calls=[tool_call("t", {"password": "hunter2"}, id="x")]
    )
    state = {"messages": [message], "nested": {"api_key": "plain", "note": ("token=abc123xyz",)}}
    out = redact_payload(state)
    assert out["messages"][0].tool_calls[0]["args"] == {"password": "***"}
    assert out["nested"] == {"api_key": "***", "note": ("token=***",)}
    assert "abc.def.ghi" not in out["messages"][0].content
    assert message.tool_calls[0]["args"] == {"password": "hunter2"}  # never changed in place
    long_text = ("word " * 5000) + "password=hunter2 " + ("tail " * 3000)
    assert redact_payload(long_text) == long_text.replace("hunter2", "***")
    assert redact_payload("nothing\n  to   hide") == "nothing\n  to   hide"  # as it is
