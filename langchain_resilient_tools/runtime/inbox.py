"""Results of worker threads handed to an event loop, many per wake-up.

A worker that finishes a sync tool for a coroutine must wake the coroutine's loop.
``loop.call_soon_threadsafe`` per result writes to the loop's self-pipe each time, and
every write is one more wake-up of the loop's thread and one more fight for the GIL
with the workers still running: with ten calls in flight that costs more CPU than the
calls' own stages. An `Inbox` collects the results of one loop and wakes it once for
all of those that arrive before it drains them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class Inbox:
    """Callbacks posted from any thread, run on `loop` in order, one wake-up per batch."""

    __slots__ = ("_armed", "_items", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._items: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._armed = False
        """A drain is scheduled and has not started yet: a new item needs no wake-up."""

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop soon (from any thread; never raises)."""
        self._items.append((fn, args))
        if self._armed:
            return
        self._armed = True
        # A closed loop: nobody waits any more (and nothing will be scheduled again).
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        # Disarmed *before* taking items: an item posted after this point either is
        # taken below or schedules a drain of its own (at worst an empty one).
        self._armed = False
        items = self._items
        while items:
            fn, args = items.popleft()
            try:
                fn(*args)
            except Exception:  # one failing callback must not strand the others
                log.exception("an inbox callback failed")


_local = threading.local()


def inbox_for(loop: asyncio.AbstractEventLoop) -> Inbox:
    """The inbox of `loop`, called from the loop's own thread.

    Kept per thread for the loop last used there; a thread that switches loops gets a
    new inbox (the old one still serves the results it was promised).
    """
    inbox: Inbox | None = getattr(_local, "inbox", None)
    if inbox is None or inbox.loop is not loop:
        inbox = _local.inbox = Inbox(loop)
    return inbox
