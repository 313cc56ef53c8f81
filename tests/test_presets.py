"""The presets: ``ToolPolicy.flaky_read()``, ``.critical_write()``, ``.mcp()``, each
through the adapters; keyword arguments change them group by group."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_resilient_tools import (
    BreakerPolicy,
    Cache,
    Fallback,
    Hedge,
    ResilientTool,
    ResultChecks,
    RetryPolicy,
    ToolPolicy,
    UnknownOutcome,
    UsageError,
)
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.test_verify import CALL, OrderService, order_tool
from tests.tools import CALLS, counted, flaky_tool


def test_what_each_preset_sets() -> None:
    read = ToolPolicy.flaky_read()
    assert read.idempotent is True and read.retry.max_attempts == 4
    assert read.hedge == Hedge(delay="auto") and read.breaker == BreakerPolicy()
    assert read.fallback.stale_s == 3600
    write = ToolPolicy.critical_write()
    assert write.idempotent is False and write.journal.enabled and write.dedup.mode == "block"
    assert write.unknown_outcome.action == "interrupt"
    assert write.retry.max_attempts == 3 and write.retry.retry_refused_writes  # refused only
    verified = ToolPolicy.critical_write(verify=_lookup)
    assert verified.unknown_outcome == UnknownOutcome(verify=_lookup)
    mcp = ToolPolicy.mcp()
    assert mcp.timeout == 10 and mcp.results.detect_error_text is True


def _lookup(info: Any) -> None:
    return None


def test_overrides_change_a_preset_group_by_group() -> None:
    read = ToolPolicy.flaky_read(retry=RetryPolicy(initial_delay=1), cache=60, dedup="off")
    assert read.retry == RetryPolicy(max_attempts=4, initial_delay=1)
    assert read.cache == Cache(ttl_s=60) and read.fallback == Fallback(stale_s=3600)
    assert read.dedup.mode == "off" and read.hedge == Hedge(delay="auto")
    assert ToolPolicy.mcp(timeout=3).timeout == 3
    with pytest.raises(UsageError, match="Did you mean 'retry'"):
        ToolPolicy.flaky_read(retires=2)


# -- flaky_read --------------------------------------------------------------------------


def test_flaky_read_retries_a_tool_whose_name_says_nothing(harness: Harness) -> None:
    """``acme_quote`` matches neither prefix list: by default a write, never retried."""
    calls = [tool_call("acme_quote", {"query": "x"}, id="c1")]
    default = harness.run([flaky_tool("acme_quote", failures=3)], calls)
    assert json.loads(str(default["c1"].content))["error"] == "unknown_outcome"
    assert CALLS["acme_quote"] == 1
    CALLS.clear()
    result = harness.run(
        [flaky_tool("acme_quote", failures=3)], calls, policy=ToolPolicy.flaky_read()
    )
    assert result["c1"].status == "success", result["c1"].content
    assert CALLS["acme_quote"] == 4


def test_flaky_read_answers_with_the_last_good_result_when_the_service_is_down(
    harness: Harness,
) -> None:
    down = {"now": False}

    def acme_quote(query: str) -> str:
        if down["now"]:
            raise ConnectionError("service unavailable")
        return f"quote for {query}"

    turns = [
        [tool_call("acme_quote", {"query": "x"}, id="c1")],
        [tool_call("acme_quote", {"query": "x"}, id="c2")],
    ]
    results = harness.run_turns(
        [counted("acme_quote", acme_quote)], turns,
        policy=ToolPolicy.flaky_read(dedup="off"),
        before_turn=lambda i: down.update(now=i == 1),
    )  # fmt: skip
    stale = results[1]["c2"]
    assert stale.status == "success" and "quote for x" in str(stale.content)
    assert stale.response_metadata["resilience"]["served_by"] == "stale_cache"
    assert CALLS["acme_quote"] == 1 + 4  # once, then four attempts while it is down


# -- critical_write --------------------------------------------------------------------


def test_critical_write_looks_a_lost_reply_up_instead_of_writing_twice(harness: Harness) -> None:
    service = OrderService("after")  # the order is written, then the reply is lost
    policy = ToolPolicy.critical_write(verify=service.lookup)
    result = harness.run([order_tool(service)], CALL, policy=policy)
    answer = result["c1"]
    assert answer.status == "success" and "order o-1 for tea" in str(answer.content)
    assert answer.response_metadata["resilience"]["served_by"] == "verify"
    assert len(service.keys) == 1


def test_critical_write_without_a_lookup_asks_a_person(graph_harness: Harness) -> None:
    h = graph_harness
    service = OrderService("after")
    ai = AIMessage("", tool_calls=CALL)
    graph = h.build(
        [order_tool(service)],
        policies={"create_order": ToolPolicy.critical_write()},
        checkpointer=InMemorySaver(),
        script=[ai, AIMessage("done")],
    )
    payload = {"messages": [ai]} if h.adapter == "node" else {"messages": [("user", "go")]}
    out = h.invoke(graph, payload, {"configurable": {"thread_id": "t1"}})
    [question] = out["__interrupt__"]
    assert question.value["tool_call_id"] == "c1"
    assert len(service.keys) == 1  # asked, not written again


def test_the_wrapper_refuses_critical_write_without_a_lookup() -> None:
    with pytest.raises(UsageError, match="ResilientToolNode"):
        ResilientTool.wrap(order_tool(OrderService()), policy=ToolPolicy.critical_write())


# -- mcp -----------------------------------------------------------------------------------


def test_mcp_counts_an_error_report_as_an_error(harness: Harness) -> None:
    """The default here leaves error texts alone; the MCP tool's own preset wins."""
    tool = counted("query_db", lambda sql: "Error: relation orders does not exist")
    result = harness.run(
        [tool], [tool_call("query_db", {"sql": "select 1"}, id="c1")],
        policy=ToolPolicy(results=ResultChecks(detect_error_text=False)),
        policies={"query_db": ToolPolicy.mcp()},
    )  # fmt: skip
    answer = result["c1"]
    assert answer.status == "error"
    assert json.loads(str(answer.content))["error"] == "tool_error"
