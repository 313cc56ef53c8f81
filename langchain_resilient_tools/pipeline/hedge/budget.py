"""The hedge budget: a token bucket filled by first attempts, emptied by hedges.

Each first attempt of a tool puts `ratio` of a token in (`Hedge.budget`, 0.05 by
default); each hedge takes one whole token, and none goes without one. The bucket holds
at most `burst` tokens (`Hedge.burst`) and starts empty. This is the shape of gRPC's
retry throttle and of Finagle's backup-request budget, with the burst counted inside
the ratio rather than on top of it:

- Over any run, from the tool's first call, hedges are at most ``ratio * first_attempts``:
  every token a hedge spends was put in by earlier calls. (A bucket that starts full
  allows ``burst`` more, which is 0.4 points over 5% in a run of 2,500 calls. A count
  over a sliding window that also allows a minimum per window lets a tool called once
  per window hedge every call.)
- Stalls that come together are covered: a tool that has been healthy for a while has
  saved up to `burst` tokens, so a bunch of up to `burst` stragglers in a row is hedged
  (after ``burst / ratio`` calls, 200 by default), where a window would already be spent.
- A service slow for everyone spends what was saved once and is then hedged at `ratio`
  of its calls at most, which is what the budget is for.

It needs no clock: it counts attempts, not seconds. Every hedge that is sent spends a
token, also one that is cancelled before it reaches the tool.
"""

from __future__ import annotations

import threading

BURST = 10
"""Tokens the bucket holds at most (`Hedge.burst`'s default)."""
_EPS = 1e-9
"""Twenty deposits of 0.05 make one token, whatever the float rounding."""


class HedgeBudget:
    """Tokens for hedges of one tool (thread-safe)."""

    __slots__ = ("_lock", "burst", "calls", "ratio", "spent", "tokens")

    def __init__(self, *, ratio: float, burst: float = BURST) -> None:
        self.ratio = ratio
        self.burst = burst
        self.tokens = 0.0
        self.calls = 0
        """First attempts counted so far."""
        self.spent = 0
        """Hedges sent so far: never more than ``ratio * calls``."""
        self._lock = threading.Lock()

    def record_call(self) -> None:
        """A first attempt was made: `ratio` of a token more (up to `burst`)."""
        with self._lock:
            self.calls += 1
            self.tokens = min(self.burst, self.tokens + self.ratio)

    def try_spend(self) -> bool:
        """Take the token of one hedge; `False` (nothing taken) when there is none."""
        with self._lock:
            if self.tokens < 1.0 - _EPS:
                return False
            self.tokens -= 1.0
            self.spent += 1
            return True

    def give_back(self) -> None:
        """A token taken for a hedge that was not sent after all (another budget refused
        it): back in the bucket, as if never taken."""
        with self._lock:
            self.tokens = min(self.burst, self.tokens + 1.0)
            self.spent -= 1
