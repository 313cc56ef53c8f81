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
    timeout, not after the configured 5 s."""
    clock = FakeClock()
    release = harness.hang_event()
    state = {"hang": False}

    def search_docs(query: str) -> str:
        if state["hang"]:
            release.wait(5)
            return "late"
        clock.advance(0.02)  # a 20 ms answer, on the injected clock
        return f"found {query}"

    spec = AdaptiveTimeout(factor=5.0, min_timeout=0.1, max_timeout=5.0, window=10, min_samples=5)
    policy = ToolPolicy(timeout=5.0, clock=clock, dedup="off", timeouts=Timeouts(adaptive=spec))
    turns = [[tool_call("search_docs", {"query": f"q{i}"}, id=f"c{i}")] for i in range(7)]

    def before(i: int) -> None:
        state["hang"] = i == 6

    results = harness.run_turns(
        [counted("search_docs", search_docs)], turns, policy=policy, before_turn=before
    )
    assert results[5]["c5"].content == "found q5"
    data = json.loads(results[6]["c6"].content)
    assert data["error"] == "timeout"
    assert "within 0.1 s" in data["message"]  # p99 20 ms x 5 = 0.1 s, not 5 s
