"""Deadlines of many attempts on one event loop, behind one loop timer.

A loop timer per attempt (``loop.call_at``) costs about as much as a fast tool's own
work: a timer handle made and pushed onto the loop's heap, then cancelled and swept
out of it. The attempts of one loop share an `Alarms` instead: a deadline is a tuple
in a heap of its own, and the loop holds one timer, for the earliest one. An attempt
that finishes in time cancels its `Alarm`, which only marks it; marked entries are
dropped when their time comes, or all at once when they are most of the heap (as the
loop sweeps its own cancelled timers), so the heap stays within about twice the
attempts in flight. Loop only (not thread-safe).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import weakref
from collections.abc import Callable
from typing import Any

_SWEEP_AT = 64
"""The heap is swept of cancelled entries only once this many have gathered (and they
are more than half of it)."""


Alarm = list[Any]
"""One deadline: ``[when, seq, ring]``, ordered by time; ``ring`` is `None` once it is
cancelled (or has rung)."""


class Alarms:
    """The deadlines of one event loop (`alarms_for`)."""

    __slots__ = ("__weakref__", "_dead", "_heap", "_loop", "_seq", "_timer", "_timer_at")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self._heap: list[Alarm] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._dead = 0

    def at(self, when: float, ring: Callable[[], Any]) -> Alarm:
        """Call `ring` at loop time `when`, unless the returned alarm is cancelled."""
        alarm = [when, next(self._seq), ring]
        heapq.heappush(self._heap, alarm)
        if self._timer is None or when < self._timer_at:
            self._arm(when)
        return alarm

    def cancel(self, alarm: Alarm) -> None:
        """The attempt finished: nothing is called at its deadline, and the alarm holds
        nothing of the attempt any more."""
        if alarm[2] is None:
            return
        alarm[2] = None
        self._dead += 1
        if self._dead >= _SWEEP_AT and self._dead * 2 > len(self._heap):
            self._heap = [entry for entry in self._heap if entry[2] is not None]
            heapq.heapify(self._heap)
            self._dead = 0

    def _arm(self, when: float) -> None:
        loop = self._loop()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if loop is not None and not loop.is_closed():
            self._timer_at = when
            self._timer = loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        loop = self._loop()
        if loop is None:
            return
        heap = self._heap
        now = loop.time()
        due: list[Callable[[], Any]] = []
        while heap and (heap[0][0] <= now or heap[0][2] is None):
            alarm = heapq.heappop(heap)
            if alarm[2] is None:
                self._dead -= 1
            else:
                due.append(alarm[2])
                alarm[2] = None
        if heap:
            self._arm(heap[0][0])
        for ring in due:
            ring()


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Alarms] = weakref.WeakKeyDictionary()
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], Alarms] | None = None


def alarms_for(loop: asyncio.AbstractEventLoop) -> Alarms:
    """The `Alarms` of `loop` (made on first use)."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    alarms = _by_loop.get(loop)
    if alarms is None:
        alarms = _by_loop[loop] = Alarms(loop)
    _last = (weakref.ref(loop), alarms)
    return alarms
