"""Sliding-window counts in constant memory (retry budget, breaker failure rate)."""

from __future__ import annotations

from langchain_resilient_tools.core.policy import BreakerPolicy
from langchain_resilient_tools.pipeline.breaker.machine import BreakerState
from langchain_resilient_tools.state.window import SlidingCounts


def test_counts_are_forgotten_within_the_last_slice_of_the_window() -> None:
    counts = SlidingCounts(10.0)  # ten 1 s slices
    counts.add(0.5, first=1)
    counts.add(3.2, first=1, second=1)
    counts.advance(9.9)
    assert (counts.first, counts.second) == (2, 1)  # within the window: kept
    counts.advance(10.0)  # the slice [0, 1) has left: the event at 0.5 is forgotten
    assert (counts.first, counts.second) == (1, 1)
    counts.advance(12.99)
    assert (counts.first, counts.second) == (1, 1)
    counts.advance(13.0)  # 9.8 s after the event at 3.2: its slice [3, 4) has left
    assert (counts.first, counts.second) == (0, 0)


def test_memory_does_not_grow_with_traffic() -> None:
    counts = SlidingCounts(60.0)
    for i in range(100_000):
        counts.add(i * 0.001, first=1)  # 1,000 events a second for 100 s
    assert len(counts) <= 11
    assert 54_000 <= counts.first <= 60_000  # the last 54 to 60 seconds


def test_a_clock_that_goes_back_counts_in_the_newest_slice() -> None:
    counts = SlidingCounts(10.0)
    counts.add(5.0, first=1)
    counts.add(4.0, first=1)
    assert counts.first == 2 and len(counts) == 1


def test_breaker_keeps_no_window_without_a_failure_rate() -> None:
    state = BreakerState(BreakerPolicy(failure_threshold=10**9))
    for i in range(1000):
        state.record(state.admit(float(i)), i % 2 == 0, float(i))  # type: ignore[arg-type]
    assert len(state._window) == 0
    rated = BreakerState(BreakerPolicy(failure_threshold=10**9, failure_rate=0.9, window=60))
    for i in range(1000):
        rated.record(rated.admit(float(i)), False, float(i))  # type: ignore[arg-type]
    assert len(rated._window) <= 11 and rated.state == "closed"
