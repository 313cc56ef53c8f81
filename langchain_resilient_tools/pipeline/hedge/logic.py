"""Hedged reads, the decisions: no I/O, no waiting, no threads.

`hedge_delay` (for ``"auto"``: `auto_delay`) says how long an attempt may run before a
hedge goes beside it, or that none may; `why_not` says whether a hedge may go now (the
budget, `pipeline.hedge.budget`, is asked after it); `Race` is the core of one hedged
call: it says what its drivers do next (`Race.next`: wait, send a hedge, or stop) and
keeps the score of the attempts (the first good answer wins; the race fails only when
every attempt failed).
The stage's two drivers (`pipeline.hedge.stage`, sync and async) do the waiting and the
running.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import ResilienceSignal
from ...core.policy import AdaptiveTimeout, Hedge, ToolPolicy
from ...runtime.adaptive import LatencyHistory, percentile
from ..health import surely_not_executed

AUTO_PERCENTILE = 0.95
"""``hedge="auto"``: the latency percentile of recent successful attempts to wait for.
The stalls a hedge is for are a few percent of the attempts, so while they are fewer
than 5% this percentile still lies among the ordinary answers, not among the stalls."""
AUTO_FACTOR = 1.25
"""``hedge="auto"``: the delay is this times the percentile. At the p95 itself, 5% of the
ordinary answers would ask for a hedge besides the stalls, more than the default budget,
which would then be spent on them and refuse the stragglers that matter. Much later
(1.5x was tried) and the hedge comes too late to help: a hedged answer takes the delay
plus one ordinary answer, and the bench's 0.3x target leaves about 120 ms of a 600 ms
stall for the delay."""
AUTO_CAP_PERCENTILE = 0.75
"""``hedge="auto"``: the percentile the delay's cap is taken from (`AUTO_CAP_FACTOR`)."""
AUTO_CAP_FACTOR = 2.0
"""``hedge="auto"``: the delay is at most `AUTO_CAP_FACTOR` times the `AUTO_CAP_PERCENTILE`
latency. The p95 is itself a stall while stalls are 5% of the latencies or more: in the
first few dozen (two stalls among twenty), or when a service stalls often. The p75 is
not moved by stalls until they are a quarter of the latencies; for ordinary answers
twice the p75 is beyond the p95 (any log-normal body up to sigma ~0.5), so the cap only
binds when the p95 has been taken by the stalls. (For a much wider body it binds always
and the budget goes to ordinary slow answers as well; a fixed `hedge=` suits such a tool.)"""
AUTO_MIN_SAMPLES = 10
"""``hedge="auto"``: latencies needed before the tool is hedged at all. Before that no
delay is known: a floor guessed in advance (tried: 50 ms, about the bench service's
median) sits among the ordinary answers of a tool slower than it and spends the whole
budget in the first steps. Ten are enough because the cap keeps the stalls among them
from setting the delay."""
AUTO_WINDOW = 200
"""``hedge="auto"``: how many recent latencies are kept."""
AUTO_MAX_DELAY_S = 60.0
"""``hedge="auto"``: the longest delay (a tool slow for everyone is hedged late, or never)."""
RATE_LIMIT_QUIET_S = 5.0
"""After a rate-limit answer without a retry hint, seconds during which the tool is not hedged."""
POLL_S = 0.005
"""How often the stage looks at a `ToolPolicy.clock` that is not `time.monotonic` (a
test's fake clock moves without waking anyone)."""


def history_for(policy: ToolPolicy) -> LatencyHistory:
    """The recent latencies of a ``hedge="auto"`` tool (the class adaptive timeouts use;
    only its window is used here: `auto_delay` decides)."""
    spec = AdaptiveTimeout(window=AUTO_WINDOW, min_samples=AUTO_MIN_SAMPLES)
    return LatencyHistory(spec)


def auto_delay(samples: list[float], floor: float) -> float | None:
    """The ``"auto"`` hedge delay for a tool whose recent latencies are `samples`:
    `AUTO_FACTOR` x their p95, at most `AUTO_CAP_FACTOR` x their p75, at least `floor`
    and at most `AUTO_MAX_DELAY_S`; `None` (no hedge) until `AUTO_MIN_SAMPLES` are known."""
    if len(samples) < AUTO_MIN_SAMPLES:
        return None
    ordered = sorted(samples)
    high = percentile(ordered, AUTO_PERCENTILE) * AUTO_FACTOR
    cap = percentile(ordered, AUTO_CAP_PERCENTILE) * AUTO_CAP_FACTOR
    return min(AUTO_MAX_DELAY_S, max(floor, min(high, cap)))


def hedge_delay(hedge: Hedge, history: LatencyHistory | None) -> float | None:
    """Seconds an attempt may run before a hedge is sent beside it; `None`: no hedge
    (``"auto"`` while fewer than `AUTO_MIN_SAMPLES` latencies are known)."""
    if hedge.delay == "auto":
        assert history is not None, "an auto hedge keeps a latency history"
        return auto_delay(history.snapshot(), hedge.min_delay)
    return float(hedge.delay)


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


class Move(enum.Enum):
    """What a hedge stage's driver does next in a race (`Race.next`)."""

    WAIT = "wait"
    """Wait for an attempt to end, at most until the next hedge is due (`Race.due`)."""
    HEDGE = "hedge"
    """A hedge is due: send it if it may go now (`why_not`, the budgets), else `hold`."""
    DONE = "done"
    """The race is decided: `Race.outcome` is the call's."""


@dataclass(slots=True)
class Race:
    """The attempts of one hedged call: when the next hedge is due, which attempts run,
    which failed, which won.

    A driver starts the first attempt, then asks `next` until it says ``DONE``, handing
    every attempt's end back (`won`, `lost`). Not thread-safe: the sync stage holds a
    lock around it. Attempt 0 is the first one, 1.. the hedges.
    """

    delay: float = 0.0
    """Seconds between hedges: the n-th is due `delay` x n after the first attempt
    reached its tool (`served`)."""
    max_hedges: int = 0
    began: float = 0.0
    """The `ToolPolicy.clock` time at which the first attempt was sent."""
    served: float | None = None
    """The clock time at which the first attempt reached its tool (`core.probe`), once
    known: the time it waited for a thread on the way does not count as its being slow."""
    anchor: float = 0.0
    """What the hedges are due from: `served` once known, until then the last time a
    hedge would have been due (`began` at first)."""
    came_due: int = 0
    """Hedges that came due so far (sent or not)."""
    started: int = 0
    running: int = 0
    refused: int = 0
    """Hedges that were not sent after all (no slot, no token, circuit open ...)."""
    winner: int | None = None
    value: Any = None
    failures: dict[int, BaseException] = field(default_factory=dict)
    fatal: BaseException | None = None
    """Control flow or an author's mistake: it ends the race at once and is raised."""

    def __post_init__(self) -> None:
        self.anchor = self.began

    @property
    def due(self) -> float | None:
        """The clock time at which the next hedge is due; `None`: no more in this race."""
        if self.came_due >= self.max_hedges:
            return None
        return self.anchor + self.delay * (self.came_due + 1)

    def next(self, now: float, served: float | None, returned: bool) -> Move:
        """What to do at clock time `now`: wait, send the hedge now due, or stop.
        `served`: when the first attempt reached its tool, if it has; `returned`: its
        tool has answered (the answer may not have reached the race yet).

        A first attempt still on its way to the tool when the delay has passed (waiting
        for a worker thread on a busy machine, for a slot, for a token) has not been slow
        at the service: it is looked at again one `delay` later, and hedged `delay` after
        it reached the tool. A hedge would wait on the same way, and the budget is kept
        for the service's own stragglers. Nor is one whose tool has answered, while its
        answer is on its way back.
        """
        if self.decided:
            return Move.DONE
        if served is not None and self.served is None:
            self.served = self.anchor = served
        due = self.due
        if due is None or now < due:
            return Move.WAIT
        if self.served is None or returned:
            self.anchor = now
            return Move.WAIT
        self.came_due += 1
        return Move.HEDGE

    def hold(self) -> None:
        """The hedge that came due may not go: none goes later in this race either."""
        self.came_due = self.max_hedges

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
