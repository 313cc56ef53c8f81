"""Adaptive timeouts: a tool's timeout follows its own recent latencies.

The timeout is a high percentile of the latest successful attempts times a factor,
clamped to bounds; until enough latencies are known, the configured timeout is used.
"""

from __future__ import annotations

import math
import threading
from collections import deque

from ..core.policy import AdaptiveTimeout


def percentile(samples: list[float], q: float) -> float:
    """The nearest-rank `q` percentile (0 < q <= 1) of non-empty `samples`."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


class LatencyHistory:
    """The recent latencies of one tool (bounded, thread-safe)."""

    def __init__(self, spec: AdaptiveTimeout) -> None:
        self.spec = spec
        self._samples: deque[float] = deque(maxlen=spec.window)
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self._samples.append(max(0.0, seconds))

    def snapshot(self) -> list[float]:
        """The latencies held now, oldest first."""
        with self._lock:
            return list(self._samples)

    def timeout(self, configured: float | None) -> float | None:
        """The timeout for the next attempt, given the configured one."""
        spec = self.spec
        with self._lock:
            samples = list(self._samples)
        if len(samples) < spec.min_samples:
            return configured
        value = percentile(samples, spec.percentile) * spec.factor
        return min(spec.max_timeout, max(spec.min_timeout, value))
