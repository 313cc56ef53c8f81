"""The retry budget: retries of one tool are limited by how many calls it gets.

Within a sliding window of `window` seconds at most ``minimum + ratio * calls`` retries
are allowed, where `calls` counts first attempts. While a service is healthy this never
binds; when it is down, it caps the extra load retries add (a ratio of 0.2 means at
most 20% more traffic) instead of multiplying it by `max_attempts`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable


class RetryBudget:
    """Counts calls and retries of one tool over a sliding window (thread-safe)."""

    def __init__(
        self, *, ratio: float, minimum: int, window: float, clock: Callable[[], float]
    ) -> None:
        self.ratio = ratio
        self.minimum = minimum
        self.window = window
        self.clock = clock
        self._calls: deque[float] = deque()
        self._retries: deque[float] = deque()
        self._lock = threading.Lock()

    def _prune(self, now: float) -> None:
        horizon = now - self.window
        for times in (self._calls, self._retries):
            while times and times[0] <= horizon:
                times.popleft()

    def record_call(self) -> None:
        """A new call (its first attempt) was made."""
        with self._lock:
            now = self.clock()
            self._prune(now)
            self._calls.append(now)

    def try_spend(self) -> bool:
        """Take one retry from the budget; `False` when it is used up."""
        with self._lock:
            now = self.clock()
            self._prune(now)
            if len(self._retries) >= self.minimum + self.ratio * len(self._calls):
                return False
            self._retries.append(now)
            return True
