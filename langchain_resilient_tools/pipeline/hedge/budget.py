"""The hedge budget: a token bucket filled by first attempts, emptied by hedges.

Each first attempt of a tool puts `ratio` of a token in (`Hedge.budget`,
0.05 by default); each hedge takes one whole token, and none goes without one. The
bucket holds at most `burst` tokens and starts full. This is the shape of gRPC's retry
throttle and of Finagle's backup-request budget, and it does what a count over a sliding
time window does not:

- The long-run bound holds for any traffic: over any run, hedges are at most
  ``burst + ratio * first_attempts``. (A window that also allows a minimum per window
  lets a tool called once per window hedge every call.)
- Stalls that come together are covered: a healthy tool's bucket is full, so a bunch of
  up to `burst` stragglers in a row is hedged, where a window would already be spent.
- A service slow for everyone spends the bucket once and is then hedged at `ratio` of
  its calls at most, which is what the budget is for.

It needs no clock: it counts attempts, not seconds.
"""

from __future__ import annotations

import threading

BURST = 10.0
"""Tokens the bucket holds at most, and starts with."""
_EPS = 1e-9
"""Twenty deposits of 0.05 make one token, whatever the float rounding."""


class HedgeBudget:
    """Tokens for hedges of one tool (thread-safe)."""

    __slots__ = ("_lock", "burst", "ratio", "tokens")

    def __init__(self, *, ratio: float, burst: float = BURST) -> None:
        self.ratio = ratio
        self.burst = burst
        self.tokens = burst
        self._lock = threading.Lock()

    def record_call(self) -> None:
        """A first attempt was made: `ratio` of a token more (up to `burst`)."""
        with self._lock:
            self.tokens = min(self.burst, self.tokens + self.ratio)

    def try_spend(self) -> bool:
        """Take the token of one hedge; `False` (nothing taken) when there is none."""
        with self._lock:
            if self.tokens < 1.0 - _EPS:
                return False
            self.tokens -= 1.0
            return True
