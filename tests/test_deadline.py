"""Deadline budget: a call's deadline caps every attempt timeout and every backoff wait."""

from __future__ import annotations

import json
import time
from typing import Any

from langchain_resilient_tools import RetryPolicy, ToolPolicy
from langchain_resilient_tools.testing import tool_call
from tests.conftest import Harness
from tests.tools import CALLS, failing_tool, hung_sync_tool


def test_deadline_caps_the_attempt_timeout(harness: Harness) -> None:
    tool = hung_sync_tool("search_docs", harness.hang_event())
    policy = ToolPolicy(timeout=5.0, deadline_s=0.2, retry=RetryPolicy(max_attempts=3))
    start = time.monotonic()
    result = harness.run([tool], [tool_call("search_docs", {"query": "q"}, id="c1")], policy=policy)
    elapsed = time.monotonic() - start
    data = json.loads(result["c1"].content)
    assert data["error"] == "timeout"
    assert elapsed < 1.5  # not the 5 s attempt timeout, let alone three of them
    assert CALLS["search_docs"] == 1  # no time was left for a retry


def test_deadline_caps_backoff_waits(harness: Harness, testing_mode: Any) -> None:
    policy = ToolPolicy(
        deadline_s=0.25,
        retry=RetryPolicy(max_attempts=3, initial_delay=5.0, max_delay=5.0, jitter=0),
    )
    result = harness.run(
        [failing_tool("search_docs", ConnectionError("down"))],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    assert json.loads(result["c1"].content)["error"] == "transient_failure"
    assert len(testing_mode.sleeps) == 2
    assert all(0 < s <= 0.25 for s in testing_mode.sleeps), testing_mode.sleeps


def test_run_wide_deadline_from_config(harness: Harness) -> None:
    tool = hung_sync_tool("search_docs", harness.hang_event())
    deadline = time.monotonic() + 0.2
    start = time.monotonic()
    result = harness.run(
        [tool],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=ToolPolicy(timeout=5.0, retry=RetryPolicy(max_attempts=1)),
        config={"configurable": {"lrt_deadline": deadline}},
    )
    assert json.loads(result["c1"].content)["error"] == "timeout"
    assert time.monotonic() - start < 1.5


def test_passed_deadline_does_not_run_the_tool(harness: Harness) -> None:
    result = harness.run(
        [failing_tool("search_docs", ConnectionError("down"))],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        config={"configurable": {"lrt_deadline": time.monotonic() - 1}},
    )
    data = json.loads(result["c1"].content)
    assert data["error"] == "timeout" and data["attempts"] == 0
    assert CALLS["search_docs"] == 0
