"""Counts over a sliding time window, in constant memory.

The retry budget (calls and retries) and the breaker's failure rate (calls and
failures) count events over the last `window` seconds. Keeping one timestamp per event
costs memory in proportion to the traffic (a tool called 2,000 times a second holds
120,000 entries for a 60 s window) and an allocation per call. `SlidingCounts` keeps
`buckets` time slices instead, each with its two totals, as time-based sliding windows
usually do: an event is forgotten between ``window - window / buckets`` and `window`
seconds after it happened.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Sequence

BUCKETS = 10
"""Slices per window: an event is forgotten up to a tenth of the window early."""


class SlidingCounts:
    """Two counters (`first`, `second`) summed over the last `window` seconds.

    Not thread-safe: the owner holds its own lock.
    """

    __slots__ = ("_buckets", "_slices", "_width", "first", "second")

    def __init__(self, window: float, *, buckets: int = BUCKETS) -> None:
        self._width = window / buckets
        self._slices = buckets
        self._buckets: deque[list[int]] = deque()  # [slice index, first, second]
        self.first = 0
        self.second = 0

    def add_firsts(self, times: Sequence[float]) -> None:
        """Count a `first` event at each of `times` (ascending), one `add` per slice."""
        width, start, n = self._width, 0, len(times)
        while start < n:
            end = bisect_left(times, (int(times[start] // width) + 1) * width, start)
            end = max(end, start + 1)  # at least one (a time on a slice's very edge)
            self.add(times[end - 1], first=end - start)
            start = end

    def advance(self, now: float) -> None:
        """Forget the slices that have left the window at time `now`."""
        horizon = int(now // self._width) - self._slices
        buckets = self._buckets
        while buckets and buckets[0][0] <= horizon:
            _, first, second = buckets.popleft()
            self.first -= first
            self.second -= second

    def add(self, now: float, first: int = 0, second: int = 0) -> None:
        """Count `first` and `second` events at time `now` (and forget what is too old)."""
        index = int(now // self._width)
        buckets = self._buckets
        if buckets and buckets[-1][0] >= index:  # this slice (or a clock that went back)
            # Nothing to forget: the window moved last when this slice was opened.
            bucket = buckets[-1]
        else:
            self.advance(now)
            bucket = [index, 0, 0]
            buckets.append(bucket)
        if first:
            bucket[1] += first
            self.first += first
        if second:
            bucket[2] += second
            self.second += second

    def __len__(self) -> int:
        """Slices held (at most `buckets` + 1): the memory does not grow with traffic."""
        return len(self._buckets)
