"""`Probe`: when one attempt of a hedged call was with its tool, seen from where it ran.

The hedge stage (`pipeline.hedge`) gives each attempt of a race a probe; the attempt
stage runs the tool through it (`Probe.run`, on the worker thread of a sync tool), so
the probe knows when the tool began and when it answered. Waiting for a worker thread,
and for the loop or caller to notice the answer, is left out: on a busy machine those
waits are the scheduler's, not the service's, and a hedge delay learned from them grows
with the load until hedges come too late to help.

It also keeps a losing attempt from running at all once the race is decided
(`supersede`): an attempt still queued for a thread then never reaches its tool, and one
already with its tool says when it lets go of its thread (so the thread is counted while
it is held, without waiting for any loop to run again). One whose tool can be stopped (an
async-only tool's coroutine, run from sync code on a loop of ours: `cancel_with`) is
stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .errors import Superseded

T = TypeVar("T")


class Probe:
    """The service side of one attempt: `started` and `ended` in `clock` time (thread-safe)."""

    __slots__ = ("_cancel", "_lock", "_on_end", "clock", "ended", "started", "superseded")

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.started: float | None = None
        """When the tool began (`None`: not yet, e.g. still waiting for a thread)."""
        self.ended: float | None = None
        """When the tool answered or raised (`None`: not yet)."""
        self.superseded = False
        """The race was decided without this attempt: if it has not begun, it never will."""
        self._on_end: Callable[[], Any] | None = None
        self._cancel: Callable[[], Any] | None = None
        self._lock = threading.Lock()

    @property
    def service_s(self) -> float | None:
        """Seconds the tool took (`None` until it answered)."""
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started

    def _begin(self) -> None:
        with self._lock:
            if self.superseded:
                raise Superseded()
            self.started = self.clock()

    def _end(self) -> None:
        with self._lock:
            self.ended = self.clock()
            on_end, self._on_end = self._on_end, None
            self._cancel = None
        if on_end is not None:
            on_end()

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()`, stamped; raises `Superseded` (and does not call `fn`) when the race
        was decided before it began."""
        self._begin()
        try:
            return fn()
        finally:
            self._end()

    async def arun(self, make: Callable[[], Awaitable[T]]) -> T:
        """`await make()`, stamped (an async tool: a losing one is cancelled instead)."""
        self._begin()
        try:
            return await make()
        finally:
            self._end()

    def cancel_with(self, cancel: Callable[[], Any]) -> bool:
        """While the tool runs, `cancel()` stops it should the race be decided without
        it (`supersede`). `False` (nothing kept) when the race already was: the caller
        stops it itself."""
        with self._lock:
            if self.superseded:
                return False
            self._cancel = cancel
            return True

    def supersede(self, on_end: Callable[[], Any]) -> bool:
        """The race is decided without this attempt. `True` when its tool is running:
        it is stopped if it can be (`cancel_with`), and `on_end` is called (on the thread
        that ran it) once it lets go; `False` when it has already ended, or never began
        (and now never will)."""
        with self._lock:
            self.superseded = True
            if self.started is None or self.ended is not None:
                return False
            self._on_end = on_end
            cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()
        return True
