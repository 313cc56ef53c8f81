"""The retry budget: retries of one tool are limited by how many calls it gets.

Within a sliding window of `window` seconds at most ``minimum + ratio * calls`` retries
are allowed, where `calls` counts first attempts (in time slices, `state.window.SlidingCounts`,
so memory does not grow with traffic). While a service is healthy this never binds;
when it is down, it caps the extra load retries add (a ratio of 0.2 means at most 20%
more traffic) instead of multiplying it by `max_attempts`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...state.window import SlidingCounts


class RetryAllowance:
    """The retries one tool may still make: its calls and retries counted over a sliding
    window (thread-safe). Built from a `RetryPolicy.budget` (the `RetryBudget` option)."""

    def __init__(
        self, *, ratio: float, minimum: int, window: float, clock: Callable[[], float]
    ) -> None:
        self.ratio = ratio
        self.minimum = minimum
        self.window = window
        self.clock = clock
        self._counts = SlidingCounts(window)  # first: calls, second: retries
        self._lock = threading.Lock()

    def record_call(self) -> None:
        """A new call (its first attempt) was made."""
        with self._lock:
            self._counts.add(self.clock(), first=1)

    def try_spend(self) -> bool:
        """Take one retry from the budget; `False` when it is used up."""
        with self._lock:
            now = self.clock()
            counts = self._counts
            counts.advance(now)
            if counts.second >= self.minimum + self.ratio * counts.first:
                return False
            counts.add(now, second=1)
            return True
