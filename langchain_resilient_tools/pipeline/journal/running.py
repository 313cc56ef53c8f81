"""The writes this process runs now, by journal key, until their receipt is written.

A re-run of the same call in this process (e.g. a resume while the first run still goes
on) waits for the first (`waiter`) instead of reading the store again and again, and a
stopped run's intent owned by this process that no run here holds any more is orphaned
(`still_running`, read by `recover.settle`).
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Any


class Run:
    """A write this process runs; `waiters` is made by the first call that waits for it
    (until then the class's `None`: a run is made without an ``__init__`` to call)."""

    waiters: concurrent.futures.Future[None] | None = None


_running: dict[str, Run] = {}
_lock = threading.Lock()


def started(key: str) -> Run:
    run = Run()
    _running[key] = run  # one store into a dict (atomic): `finished` and `waiter` lock
    return run


def finished(key: str, run: Run) -> None:
    with _lock:
        if _running.get(key) is run:
            del _running[key]
        waiters = run.waiters
    if waiters is not None:
        waiters.set_result(None)


def _owned_here(found: Any) -> bool:
    """Whether the owner of the entry `found` is this process."""
    owner = found.get("owner") if isinstance(found, dict) else None
    return isinstance(owner, dict) and owner.get("pid") == os.getpid()


def waiter(key: str, found: Any) -> concurrent.futures.Future[None] | None:
    """What ends when this process's run of `key` ends, when the live owner of `found`
    is this process (`None`: it runs elsewhere)."""
    if not _owned_here(found):
        return None
    with _lock:
        run = _running.get(key)
        if run is None:
            return None
        if run.waiters is None:
            run.waiters = concurrent.futures.Future()
        return run.waiters


def still_running(key: str, found: Any) -> bool:
    """Whether this process, the owner of `found`, still runs `key` (nothing waits)."""
    if not _owned_here(found):
        return False
    with _lock:
        return key in _running
