"""Process isolation: a hung sync tool in a worker process is killed at its timeout."""

from __future__ import annotations

import json
import time

import pytest

from langchain_resilient_tools import ResilientTool, ResilientToolNode, RetryPolicy, ToolPolicy
from langchain_resilient_tools._errors import UsageError
from langchain_resilient_tools._isolate import prewarm, run_isolated
from langchain_resilient_tools.testing import tool_call
from tests._isolated_tools import hang_tool, lookup_tool
from tests.conftest import Harness
from tests.tools import ok_tool


def test_isolated_call_returns_its_result() -> None:
    assert run_isolated(lookup_tool, {"query": "warm"}, 60) == "found warm"


def test_hung_isolated_tool_is_killed_on_time(harness: Harness) -> None:
    prewarm(2)  # worker start-up is not part of what is measured
    policy = ToolPolicy(timeout=0.3, isolate=True, retry=RetryPolicy(max_attempts=1))
    start = time.monotonic()
    result = harness.run(
        [hang_tool, lookup_tool],
        [
            tool_call("get_hang", {"query": "q"}, id="hang"),
            tool_call("lookup_docs", {"query": "q"}, id="ok"),
        ],
        policy=policy,
    )
    assert time.monotonic() - start < 1.0
    data = json.loads(result["hang"].content)
    assert data["error"] == "timeout" and "0.3 s" in data["message"]
    assert result["ok"].content == "found q"


def test_unpicklable_tool_is_refused_at_wrap_time() -> None:
    policy = ToolPolicy(isolate=True)
    with pytest.raises(UsageError, match="cannot be pickled"):
        ResilientTool.wrap(ok_tool(), policy=policy)  # a closure
    with pytest.raises(UsageError, match="cannot be pickled"):
        ResilientToolNode([ok_tool()], policy=policy)
