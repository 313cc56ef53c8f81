"""Circuit breaker: the pure state machine, the thread-safe holder, and the stage."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from langchain_resilient_tools import BreakerPolicy, RetryPolicy, ToolPolicy
from langchain_resilient_tools.core.errors import CircuitOpen
from langchain_resilient_tools.pipeline.breaker.machine import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    BreakerState,
    CircuitBreaker,
    Ticket,
)
from langchain_resilient_tools.testing import tool_call
from tests.clock import FakeClock
from tests.conftest import Harness
from tests.support.answers import error_of
from tests.tools import CALLS, counted

# -- the pure state machine ----------------------------------------------------------


def _call(state: BreakerState, now: float, failed: bool | None) -> None:
    ticket = state.admit(now)
    assert isinstance(ticket, Ticket)
    state.record(ticket, failed, now)


def test_opens_at_the_consecutive_threshold() -> None:
    state = BreakerState(BreakerPolicy(failure_threshold=3, recovery_time=10))
    _call(state, 0, True)
    _call(state, 0, True)
    _call(state, 0, False)  # a success resets the count
    _call(state, 1, True)
    _call(state, 1, True)
    assert state.state == CLOSED
    _call(state, 2, True)
    assert state.state == OPEN
    assert state.admit(5) == pytest.approx(7.0)  # refused: seconds until the probe


def test_opens_at_the_failure_rate_once_enough_calls() -> None:
    policy = BreakerPolicy(
        failure_threshold=100, failure_rate=0.5, min_calls=6, window=10, recovery_time=5
    )
    state = BreakerState(policy)
    for failed in (True, False, True, False, True):  # 3/5 failed, but below min_calls
        _call(state, 1, failed)
    assert state.state == CLOSED
    _call(state, 1, False)  # 3/6 = 0.5
    assert state.state == OPEN


def test_failure_rate_window_forgets_old_calls() -> None:
    policy = BreakerPolicy(failure_threshold=100, failure_rate=0.5, min_calls=4, window=10)
    state = BreakerState(policy)
    for _ in range(3):
        _call(state, 0, True)
    # 11 s later the three failures have left the window: 1 failure in 4 calls
    for failed in (False, False, False, True):
        _call(state, 11, failed)
    assert state.state == CLOSED


def test_half_open_probe_closes_or_reopens() -> None:
    state = BreakerState(BreakerPolicy(failure_threshold=1, recovery_time=10))
    _call(state, 0, True)
    assert state.state == OPEN
    probe = state.admit(10)
    assert isinstance(probe, Ticket) and probe.probe and state.state == HALF_OPEN
    assert state.admit(10) == 1.0  # a second caller while the probe runs is refused
    state.record(probe, True, 10.5)
    assert state.state == OPEN and state.opened_at == 10.5  # failed probe: open again
    probe = state.admit(20.5)
    assert isinstance(probe, Ticket)
    state.record(probe, False, 21)
    assert state.state == CLOSED
    assert [new for _, new in state.changes] == [OPEN, HALF_OPEN, OPEN, HALF_OPEN, CLOSED]


def test_late_verdicts_from_before_a_transition_are_ignored() -> None:
    state = BreakerState(BreakerPolicy(failure_threshold=1, recovery_time=10))
    early = state.admit(0)
    _call(state, 0, True)  # opens
    assert isinstance(early, Ticket)
    state.record(early, False, 1)  # admitted while closed: must not close the circuit
    assert state.state == OPEN


def test_a_cancelled_probe_frees_the_slot() -> None:
    state = BreakerState(BreakerPolicy(failure_threshold=1, recovery_time=1))
    _call(state, 0, True)
    probe = state.admit(2)
    assert isinstance(probe, Ticket)
    state.record(probe, None, 2)  # cancelled: no verdict
    assert state.state == HALF_OPEN
    assert isinstance(state.admit(2), Ticket)


# -- the holder: exactly one probe under concurrency -------------------------------


def _open_breaker(clock: FakeClock, changes: list[tuple[str, str, str]]) -> CircuitBreaker:
    policy = BreakerPolicy(
        failure_threshold=1,
        recovery_time=30,
        on_state_change=lambda tool, old, new: changes.append((tool, old, new)),
    )
    breaker = CircuitBreaker("get_x", policy, clock)
    breaker.release(breaker.acquire(), True)
    assert breaker.state == OPEN
    clock.advance(30)
    return breaker


def test_exactly_one_probe_among_50_threads() -> None:
    clock, changes = FakeClock(), []
    breaker = _open_breaker(clock, changes)
    barrier = threading.Barrier(50)
    tickets: list[Ticket] = []
    refused: list[float] = []

    def caller() -> None:
        barrier.wait()
        try:
            tickets.append(breaker.acquire())
        except CircuitOpen as exc:
            refused.append(exc.retry_after_s)

    threads = [threading.Thread(target=caller) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tickets) == 1 and tickets[0].probe
    assert len(refused) == 49
    assert changes == [("get_x", CLOSED, OPEN), ("get_x", OPEN, HALF_OPEN)]


def test_exactly_one_probe_among_50_tasks() -> None:
    clock, changes = FakeClock(), []
    breaker = _open_breaker(clock, changes)
    reached: list[int] = []

    async def caller(i: int) -> str:
        try:
            ticket = breaker.acquire()
        except CircuitOpen:
            return "refused"
        reached.append(i)
        await asyncio.sleep(0.01)  # the probe is still running while the others arrive
        breaker.release(ticket, False)
        return "probe"

    async def main() -> list[str]:
        return await asyncio.gather(*(caller(i) for i in range(50)))

    results = asyncio.run(main())
    assert results.count("probe") == 1 and len(reached) == 1
    assert breaker.state == CLOSED
    assert changes[-1] == ("get_x", HALF_OPEN, CLOSED)


def test_a_failing_observer_does_not_break_calls(caplog: pytest.LogCaptureFixture) -> None:
    def boom(tool: str, old: str, new: str) -> None:
        raise RuntimeError("observer")

    breaker = CircuitBreaker(
        "t", BreakerPolicy(failure_threshold=1, on_state_change=boom), FakeClock()
    )
    breaker.release(breaker.acquire(), True)
    assert breaker.state == OPEN
    assert "on_state_change hook failed" in caplog.text


# -- through every adapter ---------------------------------------------------------


class Service:
    """A fake downstream service whose health a test switches."""

    def __init__(self, clock: FakeClock) -> None:
        self.up = False
        self.error: BaseException = ConnectionError("service down")
        self.clock = clock
        self.latency = 0.0

    def tool(self, name: str = "get_quote") -> Any:
        def get(symbol: str) -> str:
            self.clock.advance(self.latency)
            if not self.up:
                raise self.error
            return f"quote {symbol}"

        return counted(name, get)


def _policy(clock: FakeClock, changes: list[Any] | None = None, **breaker: Any) -> ToolPolicy:
    spec = {"failure_threshold": 3, "recovery_time": 30.0, **breaker}
    if changes is not None:
        spec["on_state_change"] = lambda tool, old, new: changes.append((old, new))
    return ToolPolicy(breaker=BreakerPolicy(**spec), retry=RetryPolicy(max_attempts=1), clock=clock)


def _calls(turn: int, n: int = 1, name: str = "get_quote") -> list[dict[str, Any]]:
    return [tool_call(name, {"symbol": f"S{turn}-{i}"}, id=f"t{turn}c{i}") for i in range(n)]


def test_open_circuit_fails_fast_without_calling_the_tool(harness: Harness) -> None:
    clock = FakeClock()
    service = Service(clock)
    results = harness.run_turns(
        [service.tool()],
        [_calls(0), _calls(1), _calls(2), _calls(3, n=4)],
        policy=_policy(clock),
        before_turn=lambda i: clock.advance(1),
    )
    assert CALLS["get_quote"] == 3  # the fourth turn never reached the service
    assert error_of(results[2], "t2c0")["error"] == "transient_failure"
    for i in range(4):
        data = error_of(results[3], f"t3c{i}")
        assert data["error"] == "circuit_open"
        assert data["attempts"] == 0
        assert data["retry_after_s"] == pytest.approx(29.0, abs=0.1)
    # the refused calls never reached the tool: the breaker answered them
    assert harness.stats()["get_quote"]["served_by"] == {"tool": 3, "breaker": 4}


def test_open_circuit_stops_the_retries_at_once(harness: Harness) -> None:
    clock = FakeClock()
    service = Service(clock)
    policy = _policy(clock).model_copy(update={"retry": RetryPolicy(max_attempts=6)})
    result = harness.run([service.tool()], _calls(0), policy=policy)
    assert CALLS["get_quote"] == 3  # the breaker opened after 3 attempts; 3 retries saved
    assert error_of(result, "t0c0")["error"] == "circuit_open"


@pytest.mark.parametrize("recovered", [True, False], ids=["closes", "reopens"])
def test_half_open_admits_one_probe_among_50_calls(harness: Harness, recovered: bool) -> None:
    clock, changes = FakeClock(), []
    service = Service(clock)

    def before(i: int) -> None:
        if i == 1:
            clock.advance(30)  # recovery time has passed
            service.up = recovered

    turns = [_calls(0, n=3), _calls(1, n=50), _calls(2)]
    results = harness.run_turns(
        [service.tool()], turns, policy=_policy(clock, changes), before_turn=before
    )
    answers = [results[1][f"t1c{i}"] for i in range(50)]
    through = [a for a in answers if a.status == "success" or "circuit_open" not in a.content]
    if recovered:
        # the probe succeeded and closed the circuit; callers that arrived after it
        # may pass too, but never more than one while it was half-open
        assert changes[:3] == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]
        assert results[2]["t2c0"].status == "success"
    else:
        assert len(through) == 1 and CALLS["get_quote"] == 3 + 1
        assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "open")]
        assert error_of(results[2], "t2c0")["error"] == "circuit_open"


def test_bad_arguments_do_not_trip_the_breaker(harness: Harness) -> None:
    clock = FakeClock()
    service = Service(clock)
    service.error = ValueError("unknown symbol")
    results = harness.run_turns(
        [service.tool()], [_calls(i) for i in range(5)], policy=_policy(clock)
    )
    assert CALLS["get_quote"] == 5
    assert all(error_of(results[i], f"t{i}c0")["error"] == "tool_error" for i in range(5))


def test_slow_calls_count_as_failures(harness: Harness) -> None:
    clock, changes = FakeClock(), []
    service = Service(clock)
    service.up, service.latency = True, 2.0
    results = harness.run_turns(
        [service.tool()],
        [_calls(i) for i in range(4)],
        policy=_policy(clock, changes, failure_threshold=2, slow_call_s=1.0),
    )
    assert results[1]["t1c0"].status == "success"  # a slow result is still returned
    assert changes == [("closed", "open")]
    assert error_of(results[2], "t2c0")["error"] == "circuit_open"
    assert CALLS["get_quote"] == 2
