"""Deadline budget: a call's deadline caps every attempt timeout and every backoff wait."""

from __future__ import annotations

import json
import time
from typing import Any

from langchain_resilient_tools import RetryPolicy, Timeouts, ToolPolicy
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.tools import CALLS, counted, failing_tool, hung_sync_tool


def hung_tool_on(clock: FakeClock, harness: Harness) -> Any:
    """A read that hangs (until the test ends) and moves the fake clock 0.2 s as it starts."""
    release = harness.hang_event()

    def search_docs(query: str) -> str:
        clock.advance(0.2)
        release.wait(30)
        return "late"

    return counted("search_docs", search_docs)


def test_deadline_caps_the_attempt_timeout(harness: Harness) -> None:
    """The deadline (0.2 s on the policy's fake clock) caps the 5 s attempt timeout, and
    once the attempt has used it up no retry starts. Only the fake clock counts: a slow
    hand-off on a loaded machine cannot use the deadline up before the tool starts."""
    clock = FakeClock()
    policy = ToolPolicy(
        timeout=5.0,
        retry=RetryPolicy(max_attempts=3),
        timeouts=Timeouts(deadline=0.2),
        clock=clock,
    )
    result = harness.run(
        [hung_tool_on(clock, harness)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    data = json.loads(result["c1"].content)
    assert data["error"] == "timeout"
    assert "within 0.2 s" in data["message"]  # not the 5 s attempt timeout
    assert CALLS["search_docs"] == 1  # no time was left for a retry


def test_deadline_caps_backoff_waits(harness: Harness, testing_mode: Any) -> None:
    """Waits that fit are capped to what is left (0.25 s on a clock that stands still)."""
    policy = ToolPolicy(
        retry=RetryPolicy(max_attempts=3, initial_delay=0.1, max_delay=0.2, jitter=0),
        timeouts=Timeouts(deadline=0.25),
        clock=FakeClock(),  # stands still: 0.25 s are left at each wait
    )
    result = harness.run(
        [failing_tool("search_docs", ConnectionError("down"))],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    assert json.loads(result["c1"].content)["error"] == "transient_failure"
    assert testing_mode.sleeps == [0.1, 0.2]
    assert CALLS["search_docs"] == 3


def test_a_backoff_that_would_use_up_the_deadline_is_not_waited(
    harness: Harness, testing_mode: Any
) -> None:
    """A 5 s backoff with 0.25 s left would leave the retry no time to run: it would
    answer ``timeout`` after the wait, for an attempt that never had a chance. The call
    is answered at once with its real failure (retryable, so the model may send it
    again), and the deadline counts as spent."""
    policy = ToolPolicy(
        retry=RetryPolicy(max_attempts=3, initial_delay=5.0, max_delay=5.0, jitter=0),
        timeouts=Timeouts(deadline=0.25),
        clock=FakeClock(),
    )
    result = harness.run(
        [failing_tool("search_docs", ConnectionError("down"))],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    data = json.loads(result["c1"].content)
    assert data["error"] == "transient_failure" and data["retryable"] is True
    assert testing_mode.sleeps == []
    assert CALLS["search_docs"] == 1


def test_a_backoff_that_leaves_the_attempt_its_timeout_is_waited(
    harness: Harness, testing_mode: Any
) -> None:
    """With ``timeout=0.05`` and 1.1 s left, a 1 s backoff leaves the next attempt its
    whole 0.05 s: it is waited, and the call is tried again."""
    policy = ToolPolicy(
        timeout=0.05,
        retry=RetryPolicy(max_attempts=2, initial_delay=1.0, max_delay=1.0, jitter=0),
        timeouts=Timeouts(deadline=1.1),
        clock=FakeClock(),
    )
    harness.run(
        [failing_tool("search_docs", ConnectionError("down"))],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    assert testing_mode.sleeps == [1.0]
    assert CALLS["search_docs"] == 2


def test_run_wide_deadline_from_config(harness: Harness) -> None:
    clock = FakeClock()
    result = harness.run(
        [hung_tool_on(clock, harness)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=ToolPolicy(timeout=5.0, retry=RetryPolicy(max_attempts=1), clock=clock),
        config={"configurable": {"lrt_deadline": clock() + 0.2}},
    )
    data = json.loads(result["c1"].content)
    assert data["error"] == "timeout"
    assert "within 0.2 s" in data["message"]  # the run's deadline, not the 5 s timeout


def test_passed_deadline_does_not_run_the_tool(harness: Harness) -> None:
    result = harness.run(
        [failing_tool("search_docs", ConnectionError("down"))],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        config={"configurable": {"lrt_deadline": time.monotonic() - 1}},
    )
    data = json.loads(result["c1"].content)
    assert data["error"] == "timeout" and data["attempts"] == 0
    assert CALLS["search_docs"] == 0


# -- the default deadline: 2 * timeout + 1 s --------------------------------------------


def slow_failing_tool(clock: FakeClock, seconds: float) -> Any:
    """A read that takes `seconds` (on the fake clock) and then fails transiently."""

    def search_docs(query: str) -> str:
        clock.advance(seconds)
        raise TimeoutError("upstream read timed out")

    return counted("search_docs", search_docs)


def test_default_deadline_is_twice_the_timeout_plus_one() -> None:
    assert ToolPolicy().call_deadline_s == 61.0
    assert ToolPolicy(timeout=1).call_deadline_s == 3.0
    assert ToolPolicy(timeout=None).call_deadline_s is None
    assert ToolPolicy(timeout=1, timeouts=Timeouts(deadline=None)).call_deadline_s is None
    assert ToolPolicy(timeout=1, timeouts=Timeouts(deadline=10)).call_deadline_s == 10


def test_only_timeout_set_answers_within_twice_the_timeout_plus_one(harness: Harness) -> None:
    clock = FakeClock()
    policy = ToolPolicy(timeout=10, clock=clock)  # retry and deadline left at their defaults
    result = harness.run(
        [slow_failing_tool(clock, 10.5)],
        [tool_call("search_docs", {"query": "q"}, id="c1")],
        policy=policy,
    )
    data = json.loads(result["c1"].content)
    assert data["error"] == "transient_failure"
    assert data["attempts"] == 2  # a third attempt would start after the 21 s deadline
    assert data["waited_s"] == 21.0  # the envelope says how long the call took
    assert CALLS["search_docs"] == 2


def test_timeout_envelope_says_how_long_it_waited(harness: Harness) -> None:
    """Two real 0.05 s timeouts; the deadline is generous (by default 1.1 s, which a
    loaded machine could use up before the second attempt)."""
    tool = hung_sync_tool("search_docs", harness.hang_event())
    policy = ToolPolicy(
        timeout=0.05, retry=RetryPolicy(max_attempts=2), timeouts=Timeouts(deadline=30.0)
    )
    result = harness.run([tool], [tool_call("search_docs", {"query": "q"}, id="c1")], policy=policy)
    data = json.loads(result["c1"].content)
    assert data["error"] == "timeout" and data["attempts"] == 2
    assert data["waited_s"] >= 0.1
