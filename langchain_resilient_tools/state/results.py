"""Where good results are kept, by call key: read by the result cache and the stale fallback.

One `ResultStore` per tool and pipeline. An entry remembers when it was stored; each
reader asks for entries no older than its own bound (the cache its TTL, the stale
fallback its maximum age). The in-memory store keeps entries in a cachetools `TTLCache`
for as long as the longest reader may want them. Another backend (e.g. LangGraph's
`BaseStore`) only has to provide `get` and `put`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from cachetools import TTLCache

from ..core.errors import BackendError
from .backend import StateBackend


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A stored result and the `clock` time it was stored at."""

    value: Any
    stored_at: float


class ResultStore(Protocol):
    """What the cache and the stale fallback need from a store."""

    clock: Callable[[], float]

    def get(self, key: str, *, max_age: float) -> StoredResult | None:
        """The entry for `key` if it is at most `max_age` seconds old."""

    def put(self, key: str, value: Any) -> None:
        """Keep `value` as the latest good result for `key`."""


class MemoryStore:
    """An in-process `ResultStore` over a cachetools `TTLCache` (thread-safe)."""

    def __init__(self, *, retention: float, maxsize: int, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._cache: TTLCache[str, StoredResult] = TTLCache(maxsize, ttl=retention, timer=clock)
        self._lock = threading.Lock()

    def get(self, key: str, *, max_age: float) -> StoredResult | None:
        with self._lock:
            entry = self._cache.get(key)
        if entry is None or self.clock() - entry.stored_at > max_age:
            return None
        return entry

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._cache[key] = StoredResult(value, self.clock())

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)


log = logging.getLogger(__name__)
NS_RESULTS = "results"
"""Namespace of results kept on a shared backend: ``results-thread`` for results shared
within a thread, ``results-global`` for those shared by every caller."""


class SharedResultStore:
    """A `state.results.ResultStore` on a backend: entries are ``(value, stored_at)``."""

    def __init__(
        self, backend: StateBackend, tool: str, retention: float, scope: str = "thread"
    ) -> None:
        self.backend = backend
        self.clock = backend.clock
        self._tool = tool
        self._retention = retention
        self._ns = f"{NS_RESULTS}-{scope}"

    def get(self, key: str, *, max_age: float) -> StoredResult | None:
        try:
            found = self.backend.get(self._ns, f"{self._tool}:{key}")
        except BackendError:
            log.warning("state store failed (cache read of %s): a miss", self._tool)
            return None
        if found is None or self.clock() - found[1] > max_age:
            return None
        return StoredResult(found[0], found[1])

    def put(self, key: str, value: Any) -> None:
        try:
            self.backend.put(
                self._ns, f"{self._tool}:{key}", (value, self.clock()), ttl=self._retention
            )
        except BackendError:
            log.warning("state store failed (cache write of %s): not kept", self._tool)
