"""Leases kept alive while their calls run: one daemon thread renews every lease.

A journaled write holds a lease in the store (`pipeline.journal`): another worker that
finds the write's intent waits for its receipt while the lease runs, and takes the
worker for dead once it has run out. `LeaseKeeper.hold` registers a renewal; the keeper
calls each renewal every ``interval`` seconds until `release`. A renewal that fails is
logged and tried again next time (the lease then simply runs out, which is safe: the
outcome becomes unknown, never run twice). One keeper per process (`keeper`); its
thread is a daemon, so it never keeps the interpreter from exiting.

A hold is a dictionary entry: the thread sleeps until the earliest renewal due (or
until a hold wakes it: only one due before that), and wakes then even if that hold was
released meanwhile, so it wakes about once per interval however many writes come and
go (most answer long before a third of their lease), never once per write. `release` returns only once no renewal of its handle is
running or can start: the caller then writes the receipt, which a late renewal would
otherwise overwrite with the intent.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews registered leases on one daemon thread."""

    def __init__(self) -> None:
        self._renewals: dict[int, tuple[float, Callable[[], None], float]] = {}
        """Handle -> (interval, renewal, monotonic time of its next renewal)."""
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        """Wakes the thread (a hold due before it would wake)."""
        self._renewed = threading.Condition(self._lock)
        """Wakes a `release` waiting for a renewal of its handle to end."""
        self._thread_pid = 0
        """The process whose keeper thread runs (0: none; after a fork, the parent's)."""
        self._wakes_at = math.inf
        """When the thread wakes next (monotonic; inf: when a hold wakes it)."""
        self._renewing: frozenset[int] = frozenset()
        """Handles whose renewal runs now (`release` waits for them)."""

    def hold(self, renew: Callable[[], None], interval: float) -> int:
        """Call `renew` every `interval` seconds until `release` of the returned handle."""
        due = time.monotonic() + interval
        with self._lock:
            handle = next(self._ids)
            if self._thread_pid != os.getpid():  # first use, or a forked child
                self._renewals.clear()  # a parent's leases are the parent's to renew
                self._thread_pid = os.getpid()
                self._wakes_at = due
                threading.Thread(target=self._run, name="lrt-lease-keeper", daemon=True).start()
            elif due < self._wakes_at:
                self._wakes_at = due
                self._wake.notify()
            self._renewals[handle] = (interval, renew, due)
            return handle

    def release(self, handle: int) -> None:
        """Stop renewing `handle`; returns once none of its renewals runs."""
        with self._lock:
            self._renewals.pop(handle, None)
            while handle in self._renewing:
                self._renewed.wait()

    def __len__(self) -> int:
        with self._lock:
            return len(self._renewals)

    def _due(self) -> list[tuple[int, Callable[[], None]]]:
        """(Under the lock) the renewals due, once the time of one has come."""
        while True:
            now = time.monotonic()
            if now < self._wakes_at:
                wait = None if self._wakes_at == math.inf else self._wakes_at - now
                self._wake.wait(timeout=wait)
                continue
            ready = [(h, r) for h, (_, r, due) in self._renewals.items() if due <= now]
            if ready:
                self._renewing = frozenset(h for h, _ in ready)
                return ready
            self._wakes_at = min((due for _, _, due in self._renewals.values()), default=math.inf)

    def _run(self) -> None:
        while True:
            with self._lock:
                ready = self._due()
            try:
                for _, renew in ready:
                    try:
                        renew()
                    except Exception:  # the lease runs out if this keeps failing: safe
                        log.warning("lease renewal failed; it will run out", exc_info=True)
            finally:
                with self._lock:
                    done = time.monotonic()
                    for handle, _ in ready:
                        held = self._renewals.get(handle)
                        if held is not None:
                            self._renewals[handle] = (held[0], held[1], done + held[0])
                    self._renewing = frozenset()
                    self._wakes_at = min(
                        (due for _, _, due in self._renewals.values()), default=math.inf
                    )
                    self._renewed.notify_all()


keeper = LeaseKeeper()
"""The process's lease keeper."""
