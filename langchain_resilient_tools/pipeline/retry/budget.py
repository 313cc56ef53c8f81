"""The retry budget: retries of one tool are limited by how many calls it gets.

Within a sliding window of `window` seconds at most ``minimum + ratio * calls`` retries
are allowed, where `calls` counts first attempts (in time slices, `state.window.SlidingCounts`,
so memory does not grow with traffic). A call is only queued as it is made (its time,
appended without a lock: every call pays it, most never see a retry); the queue is
counted when a retry is asked for, and in batches. While a service is healthy this never binds;
when it is down, it caps the extra load retries add (a ratio of 0.2 means at most 20%
more traffic) instead of multiplying it by `max_attempts`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from ...state.window import SlidingCounts

_FOLD_EVERY = 256
"""Calls queued at most before they are counted (the queue stays this short)."""


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
        self._queued: deque[float] = deque()  # calls not counted yet: their times
        self._lock = threading.Lock()

    def record_call(self) -> None:
        """A new call (its first attempt) was made: queued (a deque's append is atomic),
        counted with the next retry asked for or the next batch."""
        queued = self._queued
        queued.append(self.clock())
        if len(queued) >= _FOLD_EVERY:
            with self._lock:
                self._fold()

    def _fold(self) -> None:
        """Count the queued calls (call with the lock held); calls queued meanwhile wait
        for the next fold."""
        queued = self._queued
        n = len(queued)
        if not n:
            return
        times = sorted([queued.popleft() for _ in range(n)])
        self._counts.add_firsts(times)

    def try_spend(self) -> bool:
        """Take one retry from the budget; `False` when it is used up."""
        with self._lock:
            self._fold()
            now = self.clock()
            counts = self._counts
            counts.advance(now)
            if counts.second >= self.minimum + self.ratio * counts.first:
                return False
            counts.add(now, second=1)
            return True
