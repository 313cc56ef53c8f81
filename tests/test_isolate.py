"""Process isolation: a hung sync tool in a worker process is killed at its timeout."""

from __future__ import annotations

import json
import time

import pytest

from langchain_resilient_tools import (
    ResilientTool,
    ResilientToolNode,
    RetryPolicy,
    Timeouts,
    ToolPolicy,
)
from langchain_resilient_tools.core.errors import UsageError
from langchain_resilient_tools.runtime.isolate import prewarm, run_isolated
from langchain_resilient_tools.testing import tool_call
from tests._isolated_tools import hang_tool, lookup_tool
from tests.conftest import Harness
from tests.tools import CALLS, ok_tool


def test_isolated_call_returns_its_result() -> None:
    assert run_isolated(lookup_tool, {"query": "warm"}, 60) == "found warm"


@pytest.mark.realtime
def test_hung_isolated_tool_is_killed_on_time(harness: Harness) -> None:
    """Only a real clock shows the call coming back at its 0.3 s timeout, not when the
    30 s tool ends: the bound is generous (a loaded machine), and far below 30 s. The
    healthy sibling, in a worker process too, has the default timeout: on a loaded
    machine its round trip may take longer than 0.3 s."""
    prewarm(2)  # worker start-up is not part of what is measured
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=1), timeouts=Timeouts(isolate=True))
    hang = ToolPolicy(timeout=0.3)  # over `policy`, group by group
    start = time.monotonic()
    result = harness.run(
        [hang_tool, lookup_tool],
        [
            tool_call("get_hang", {"query": "q"}, id="hang"),
            tool_call("lookup_docs", {"query": "q"}, id="ok"),
        ],
        policy=policy,
        policies={"get_hang": hang},
    )
    assert time.monotonic() - start < 10.0
    data = json.loads(result["hang"].content)
    assert data["error"] == "timeout" and "0.3 s" in data["message"]
    assert result["ok"].content == "found q"


def test_unpicklable_tool_is_refused_at_wrap_time() -> None:
    policy = ToolPolicy(timeouts=Timeouts(isolate=True))
    with pytest.raises(UsageError, match="cannot be pickled"):
        ResilientTool.wrap(ok_tool(), policy=policy)  # a closure
    with pytest.raises(UsageError, match="cannot be pickled"):
        ResilientToolNode([ok_tool()], policy=policy)


def test_unpicklable_tool_error_says_why_and_what_works() -> None:
    with pytest.raises(UsageError) as info:
        ResilientToolNode([ok_tool()], policy=ToolPolicy(timeouts=Timeouts(isolate=True)))
    text = str(info.value)
    assert "'get_weather'" in text and "worker process" in text  # why
    assert "module level" in text and "isolate=False" in text  # what works


def test_middleware_refuses_an_unpicklable_isolated_tool_before_any_call() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from langchain_resilient_tools import ResilientToolsMiddleware
    from langchain_resilient_tools.testing import ScriptedChatModel

    tool = ok_tool()
    agent = create_agent(
        ScriptedChatModel(script=[]),
        tools=[tool],
        middleware=[ResilientToolsMiddleware(policy=ToolPolicy(timeouts=Timeouts(isolate=True)))],
    )
    with pytest.raises(UsageError, match="cannot be pickled"):
        agent.invoke({"messages": [HumanMessage("hi")]})
    assert CALLS["get_weather"] == 0
