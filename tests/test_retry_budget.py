"""Retry budget: a down service gets a bounded share of extra attempts, not a storm."""

from __future__ import annotations

import json

from langchain_resilient_tools import RetryBudget, RetryPolicy, ToolPolicy
from langchain_resilient_tools.pipeline.retry.budget import RetryAllowance
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import CALLS, failing_tool, flaky_tool


def test_budget_allows_minimum_plus_ratio_of_calls() -> None:
    clock = FakeClock()
    budget = RetryAllowance(ratio=0.5, minimum=2, window=10, clock=clock)
    for _ in range(4):
        budget.record_call()
    assert [budget.try_spend() for _ in range(5)] == [True, True, True, True, False]
    clock.advance(11)  # the window moved on: calls and retries are forgotten
    assert budget.try_spend() and budget.try_spend() and not budget.try_spend()


def test_calls_counted_in_batches_keep_their_time() -> None:
    """Calls are counted in batches (and when a retry is asked for), each in the time
    slice it was made in: a batch that spans slices forgets its oldest calls first."""
    clock = FakeClock()
    budget = RetryAllowance(ratio=0.5, minimum=0, window=10, clock=clock)
    for _ in range(150):
        budget.record_call()
    clock.advance(5)
    for _ in range(150):  # the 256th call counts the batch: 150 at t=0, 106 at t=5
        budget.record_call()
    clock.advance(5.5)  # t=10.5: the calls made at t=0 have left the window
    spent = 0
    while budget.try_spend():
        spent += 1
    assert spent == 75  # half of the 150 calls made at t=5


def test_budget_stops_a_retry_storm(harness: Harness) -> None:
    policy = ToolPolicy(
        retry=RetryPolicy(max_attempts=5, budget=RetryBudget(ratio=0.1, min=3)),
        clock=FakeClock(),
        dedup="off",
    )
    calls = [tool_call("search_docs", {"query": f"q{i}"}, id=f"c{i}") for i in range(20)]
    result = harness.run(
        [failing_tool("search_docs", ConnectionError("down"))], calls, policy=policy
    )
    # without a budget: 20 calls x 5 attempts = 100; with it: 20 + 3 + 0.1 * 20 = 25
    assert CALLS["search_docs"] == 25
    attempts = [json.loads(result[f"c{i}"].content)["attempts"] for i in range(20)]
    assert sum(attempts) == 25
    assert all(
        json.loads(m.content)["error"] == "transient_failure" for m in result.messages.values()
    )


def test_healthy_retries_stay_within_budget(harness: Harness) -> None:
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=3, budget=RetryBudget(ratio=0.0, min=2)))
    result = harness.run(
        [flaky_tool("search_docs", failures=2)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    assert result["c1"].status == "success" and CALLS["search_docs"] == 3


def test_budget_off_retries_every_call(harness: Harness) -> None:
    policy = ToolPolicy(retry=RetryPolicy(max_attempts=3, budget=None), dedup="off")
    calls = [tool_call("search_docs", {"query": f"q{i}"}, id=f"c{i}") for i in range(10)]
    harness.run([failing_tool("search_docs", ConnectionError("down"))], calls, policy=policy)
    assert CALLS["search_docs"] == 30
