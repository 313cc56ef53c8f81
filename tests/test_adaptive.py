"""Adaptive timeouts: a tool's timeout follows its own latency history."""

from __future__ import annotations

import json

import pytest

from langchain_resilient_tools import Timeouts, ToolPolicy
from langchain_resilient_tools.core.policy import AdaptiveTimeout
from langchain_resilient_tools.runtime.adaptive import LatencyHistory, percentile
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import counted

SPEC = AdaptiveTimeout(
    percentile=0.9, factor=2.0, min_timeout=0.05, max_timeout=10, window=20, min_samples=5
)


def test_percentile_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0
    assert percentile([5.0], 0.99) == 5.0
    assert percentile([float(i) for i in range(1, 101)], 0.99) == 99.0


def test_starts_from_the_configured_timeout() -> None:
    history = LatencyHistory(SPEC)
    for _ in range(4):
        history.add(0.1)
    assert history.timeout(30.0) == 30.0  # not enough samples yet
    history.add(0.1)
    assert history.timeout(30.0) == pytest.approx(0.2)


def test_converges_when_latency_shifts() -> None:
    history = LatencyHistory(SPEC)
    for _ in range(20):
        history.add(0.1)
    assert history.timeout(30.0) == pytest.approx(0.2)
    seen = []
    for _ in range(20):  # the service slows down to 1.5 s
        history.add(1.5)
        seen.append(history.timeout(30.0))
    assert seen[-1] == pytest.approx(3.0)
    assert seen == sorted(seen)  # it rises steadily, and stays put once converged
    for _ in range(20):
        history.add(20.0)
    assert history.timeout(30.0) == 10  # clamped to max_timeout
    for _ in range(20):
        history.add(0.0)
    assert history.timeout(30.0) == 0.05  # clamped to min_timeout


def test_invalid_bounds_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="max_timeout must be >= min_timeout"):
        AdaptiveTimeout(min_timeout=5, max_timeout=1)


def test_timeout_adapts_to_a_tool_that_slows_down(harness: Harness) -> None:
    """Fast answers teach a short timeout; when the tool then hangs it is cut at that
    timeout, not after the configured 5 s. The timeout follows the latest answers (a
    window of 5): 0.4 s answers first teach 2 s, under which the next answers are given
    (healthy calls are never timed against a short real timeout), then 20 ms answers
    teach 0.1 s. Latencies are read on the injected clock."""
    clock = FakeClock()
    release = harness.hang_event()
    state = {"turn": 0}

    def search_docs(query: str) -> str:
        if state["turn"] == 10:
            release.wait(5)
            return "late"
        clock.advance(0.4 if state["turn"] < 5 else 0.02)  # on the injected clock
        return f"found {query}"

    spec = AdaptiveTimeout(factor=5.0, min_timeout=0.1, max_timeout=5.0, window=5, min_samples=5)
    policy = ToolPolicy(timeout=5.0, clock=clock, dedup="off", timeouts=Timeouts(adaptive=spec))
    turns = [[tool_call("search_docs", {"query": f"q{i}"}, id=f"c{i}")] for i in range(11)]

    def before(i: int) -> None:
        state["turn"] = i

    results = harness.run_turns(
        [counted("search_docs", search_docs)], turns, policy=policy, before_turn=before
    )
    # Turns 5-9 ran under a learned timeout (2 s, from the 0.4 s answers), and answered.
    assert [results[i][f"c{i}"].content for i in range(10)] == [f"found q{i}" for i in range(10)]
    data = json.loads(results[10]["c10"].content)
    assert data["error"] == "timeout"
    assert "within 0.1 s" in data["message"]  # p99 20 ms x 5 = 0.1 s, not 5 s (nor 2 s)
