"""A fake monotonic clock for tests: time moves only when a test says so."""

from __future__ import annotations

import threading


class FakeClock:
    """Callable like `time.monotonic`; `advance(s)` moves it forward."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds
