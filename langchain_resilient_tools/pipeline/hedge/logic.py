"""Hedged reads, the decisions: no I/O, no waiting, no threads.

`hedge_delay` says how long an attempt may run before a hedge goes beside it;
`why_not` says whether a hedge may go now; `Race` keeps the score of the attempts of
one call (the first good answer wins; the race fails only when every attempt failed).
The stage (`pipeline.hedge.stage`) does the waiting and the running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import ResilienceSignal
from ...core.policy import AdaptiveTimeout, ToolPolicy
from ...runtime.adaptive import LatencyHistory
from ..health import surely_not_executed

AUTO_PERCENTILE = 0.95
"""``hedge="auto"``: the latency percentile of recent successful attempts to wait for."""
AUTO_FACTOR = 1.5
"""``hedge="auto"``: the delay is this times the percentile. At the p95 itself, 5% of the
calls would ask for a hedge, the whole default budget, which would then be spent on
ordinary slow answers and refuse the stragglers that matter."""
AUTO_MIN_SAMPLES = 50
"""``hedge="auto"``: latencies needed before the percentile is used (`hedge_min_delay` until then)."""
AUTO_WINDOW = 200
"""``hedge="auto"``: how many recent latencies are kept."""
AUTO_MAX_DELAY_S = 60.0
"""``hedge="auto"``: the longest delay (a tool slow for everyone is hedged late, or never)."""
BUDGET_WINDOW_S = 10.0
"""The sliding window the hedge budget (`ToolPolicy.hedge_budget`) counts over."""
RATE_LIMIT_QUIET_S = 5.0
"""After a rate-limit answer without a retry hint, seconds during which the tool is not hedged."""
POLL_S = 0.005
"""How often the stage looks at a `ToolPolicy.clock` that is not `time.monotonic` (a
test's fake clock moves without waking anyone)."""


def history_for(policy: ToolPolicy) -> LatencyHistory:
    """A latency history for ``hedge="auto"`` (the class adaptive timeouts use)."""
    floor = policy.hedge_min_delay
    spec = AdaptiveTimeout(
        percentile=AUTO_PERCENTILE,
        factor=AUTO_FACTOR,
        min_timeout=floor,
        max_timeout=max(floor, AUTO_MAX_DELAY_S),
        window=AUTO_WINDOW,
        min_samples=AUTO_MIN_SAMPLES,
    )
    return LatencyHistory(spec)


def hedge_delay(policy: ToolPolicy, history: LatencyHistory | None) -> float:
    """Seconds an attempt may run before a hedge is sent beside it."""
    if policy.hedge == "auto":
        assert history is not None, "an auto hedge keeps a latency history"
        delay = history.timeout(policy.hedge_min_delay)
        return policy.hedge_min_delay if delay is None else delay
    assert isinstance(policy.hedge, (int, float)), "the stage applies to hedged tools only"
    return float(policy.hedge)


def why_not(
    *,
    deadline_left: float | None,
    quiet_until: float,
    now: float,
    circuit_closed: bool,
    abandoned: int,
    max_abandoned: int,
) -> str | None:
    """Why no hedge may go now (before the budgets are asked), or `None` when one may."""
    if deadline_left is not None and deadline_left <= 0:
        return "deadline"
    if now < quiet_until:
        return "rate_limited"
    if not circuit_closed:
        return "circuit_open"
    if abandoned >= max_abandoned:
        return "threads"
    return None


def real_wait(clock: Callable[[], float], at: float | None) -> float | None:
    """How long to block before looking again whether `at` (a `clock` time) has come."""
    if at is None:
        return None
    left = max(0.0, at - clock())
    return left if clock is time.monotonic else min(left, POLL_S)


@dataclass(slots=True)
class Race:
    """The attempts of one hedged call: which run, which failed, which won.

    Not thread-safe: the sync stage holds a lock around it. Attempt 0 is the first one,
    1.. the hedges.
    """

    started: int = 0
    running: int = 0
    refused: int = 0
    """Hedges that were not sent after all (no slot, no token, circuit open ...)."""
    winner: int | None = None
    value: Any = None
    failures: dict[int, BaseException] = field(default_factory=dict)
    fatal: BaseException | None = None
    """Control flow or an author's mistake: it ends the race at once and is raised."""

    def start(self) -> int:
        """A new attempt starts; its number."""
        n = self.started
        self.started += 1
        self.running += 1
        return n

    @property
    def decided(self) -> bool:
        return self.winner is not None or self.fatal is not None or self.running == 0

    def won(self, n: int, value: Any) -> bool:
        """Attempt `n` answered; whether its answer is the call's (the first good one)."""
        self.running -= 1
        if self.winner is not None or self.fatal is not None:
            return False  # a loser's late answer changes nothing
        self.winner, self.value = n, value
        return True

    def lost(self, n: int, exc: BaseException) -> None:
        """Attempt `n` failed with `exc`."""
        over = self.winner is not None or self.fatal is not None
        self.running -= 1
        if n > 0 and isinstance(exc, ResilienceSignal) and surely_not_executed(exc):
            self.refused += 1
        if over:
            return  # after the race, nothing a loser says matters
        if not isinstance(exc, ResilienceSignal):
            self.fatal = exc
            return
        self.failures[n] = exc

    @property
    def hedges_sent(self) -> int:
        """Extra attempts that went to the tool."""
        return max(0, self.started - 1 - self.refused)

    def outcome(self) -> Any:
        """The winner's value; else the fatal error, or the first attempt's failure."""
        if self.fatal is not None:
            raise self.fatal
        if self.winner is not None:
            return self.value
        raise self.failures[min(self.failures)]
