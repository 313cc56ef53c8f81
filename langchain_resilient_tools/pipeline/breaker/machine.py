"""The circuit breaker: a pure state machine and a thread-safe holder around it.

`BreakerState` decides and never does I/O: `admit(now)` lets a call through (a `Ticket`)
or refuses it (seconds until it may try again); `record(ticket, failed, now)` feeds the
verdict back. `CircuitBreaker` adds a lock, a clock and the state-change callback. The
lock is held only for these short, non-blocking decisions, so one holder serves threads
and asyncio tasks alike (asyncio callers never await while holding it).

States: ``closed`` (calls pass, outcomes are counted) -> ``open`` (calls are refused
until `recovery_time` has passed) -> ``half_open`` (exactly one probe is let through;
everyone else is refused) -> ``closed`` on a successful probe, ``open`` on a failed one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ...core.errors import CircuitOpen
from ...core.policy import BreakerPolicy
from ...state.window import SlidingCounts

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
PROBE_BUSY_RETRY_S = 1.0
"""`retry_after_s` for calls refused while the half-open probe is running."""

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ticket:
    """Permission for one call; `probe` marks the half-open trial call."""

    probe: bool
    generation: int


class BreakerState:
    """The breaker's state machine (not thread-safe; `CircuitBreaker` guards it)."""

    def __init__(self, policy: BreakerPolicy) -> None:
        self.policy = policy
        self.state = CLOSED
        self.generation = 0
        """Bumped on every transition: verdicts of tickets from before are ignored."""
        self.consecutive = 0
        self.opened_at = 0.0
        self.probing = False
        self._window = SlidingCounts(policy.window)  # first: calls, second: failures
        self.changes: list[tuple[str, str]] = []
        """Transitions not yet reported, as ``(old, new)``."""

    def admit(self, now: float) -> Ticket | float:
        """A ticket for a call at `now`, or the seconds to wait when it is refused."""
        if self.state == OPEN:
            wait = self.opened_at + self.policy.recovery_time - now
            if wait > 0:
                return wait
            self._move(HALF_OPEN)
        if self.state == HALF_OPEN:
            if self.probing:
                return min(PROBE_BUSY_RETRY_S, self.policy.recovery_time)
            self.probing = True
            return Ticket(True, self.generation)
        return Ticket(False, self.generation)

    def record(self, ticket: Ticket, failed: bool | None, now: float) -> None:
        """Feed back a call's verdict: failed, succeeded, or `None` (does not count)."""
        if ticket.generation != self.generation:
            return  # admitted before the last transition: its verdict is out of date
        if ticket.probe:
            self.probing = False
            if failed:
                self._open(now)
            elif failed is not None:
                self._move(CLOSED)
            return
        if failed is None:
            return
        self.consecutive = self.consecutive + 1 if failed else 0
        if self.consecutive >= self.policy.failure_threshold or self._rate_exceeded(failed, now):
            self._open(now)

    def _rate_exceeded(self, failed: bool, now: float) -> bool:
        """Count the verdict in the failure-rate window (kept only when a rate is set)."""
        rate = self.policy.failure_rate
        if rate is None:
            return False
        window = self._window
        window.add(now, first=1, second=int(failed))
        return window.first >= self.policy.min_calls and window.second / window.first >= rate

    def _open(self, now: float) -> None:
        self.opened_at = now
        self._move(OPEN)

    def _move(self, new: str) -> None:
        old, self.state = self.state, new
        self.generation += 1
        self.consecutive = 0
        self.probing = False
        self._window = SlidingCounts(self.policy.window)
        self.changes.append((old, new))


class CircuitBreaker:
    """One tool's breaker, safe to share between threads and asyncio tasks."""

    def __init__(self, tool: str, policy: BreakerPolicy, clock: Callable[[], float]) -> None:
        self.tool = tool
        self.clock = clock
        self._policy = policy
        self._core = BreakerState(policy)
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        return self._core.state

    def acquire(self) -> Ticket:
        """A ticket for one call; raises `CircuitOpen` (the tool must not be touched)."""
        with self._lock:
            verdict = self._core.admit(self.clock())
            changes = self._drain()
        self._notify(changes)
        if isinstance(verdict, Ticket):
            return verdict
        raise CircuitOpen(verdict)

    def release(self, ticket: Ticket, failed: bool | None) -> None:
        """Report how the call of `ticket` went."""
        with self._lock:
            self._core.record(ticket, failed, self.clock())
            changes = self._drain()
        self._notify(changes)

    def reset(self) -> None:
        """Back to ``closed`` without reporting it (a shared breaker took over the open state)."""
        with self._lock:
            self._core._move(CLOSED)
            self._core.changes.clear()

    def notify(self, changes: list[tuple[str, str]]) -> None:
        """Report transitions decided elsewhere (a shared breaker) to `on_state_change`."""
        self._notify(changes)

    def _drain(self) -> list[tuple[str, str]]:
        changes, self._core.changes = self._core.changes, []
        return changes

    def _notify(self, changes: list[tuple[str, str]]) -> None:
        hook = self._policy.on_state_change
        if hook is None:
            return
        for old, new in changes:
            try:
                hook(self.tool, old, new)
            except Exception:  # an observer must not break the call
                log.exception("on_state_change hook failed for %s", self.tool)
