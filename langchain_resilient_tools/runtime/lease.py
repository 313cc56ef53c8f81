"""Leases kept alive while their calls run: one daemon thread renews every lease.

A journaled write holds a lease in the store (`pipeline.journal`): another worker that
finds the write's intent waits for its receipt while the lease runs, and takes the
worker for dead once it has run out. `LeaseKeeper.hold` registers a renewal; the keeper
calls each renewal every ``interval`` seconds until `release`. A renewal that fails is
logged and tried again next time (the lease then simply runs out, which is safe: the
outcome becomes unknown, never run twice). One keeper per process (`keeper`); its
thread is a daemon, so it never keeps the interpreter from exiting.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews registered leases on one daemon thread."""

    def __init__(self) -> None:
        self._renewals: dict[int, tuple[float, Callable[[], None]]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def hold(self, renew: Callable[[], None], interval: float) -> int:
        """Call `renew` every `interval` seconds until `release` of the returned handle."""
        with self._lock:
            handle = next(self._ids)
            self._renewals[handle] = (interval, renew)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="lrt-lease-keeper", daemon=True
                )
                self._thread.start()
            self._wake.notify()
            return handle

    def release(self, handle: int) -> None:
        with self._lock:
            self._renewals.pop(handle, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._renewals)

    def _run(self) -> None:
        due: dict[int, float] = {}
        while True:
            with self._lock:
                if not self._renewals:
                    self._wake.wait(timeout=5.0)
                    if not self._renewals:
                        due.clear()
                        continue
                now = time.monotonic()
                for handle, (interval, _) in self._renewals.items():
                    due.setdefault(handle, now + interval)
                for handle in [h for h in due if h not in self._renewals]:
                    del due[handle]
                ready = [(h, self._renewals[h]) for h, t in due.items() if t <= now]
                wait = min(due.values()) - now if due else 5.0
            for handle, (interval, renew) in ready:
                try:
                    renew()
                except Exception:  # the lease runs out if this keeps failing: safe
                    log.warning("lease renewal failed; it will run out", exc_info=True)
                due[handle] = time.monotonic() + interval
            if not ready:
                with self._lock:
                    self._wake.wait(timeout=max(0.01, min(wait, 5.0)))


keeper = LeaseKeeper()
"""The process's lease keeper."""
