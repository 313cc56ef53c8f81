"""`Slots`: at most N holders at once, for threads and event loops alike.

A tool's `max_concurrency` must hold across every caller of one adapter: sync calls on
worker threads and async calls on any event loop. `threading.Semaphore` would block a
loop and `asyncio.Semaphore` belongs to one loop, so `Slots` is a semaphore whose
waiters are either a thread (an `Event`) or a loop's future; a released slot is handed
to the longest waiter (first come, first served), and a waiter that gives up (deadline,
cancellation) leaves the queue under the same lock, so a slot is never lost.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque


class _Waiter:
    __slots__ = ("event", "future", "granted", "loop")

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        future: asyncio.Future[None] | None = None,
    ) -> None:
        self.granted = False
        self.loop, self.future = loop, future
        self.event = threading.Event() if future is None else None

    def wake(self) -> None:
        """Hand the slot over (called under the `Slots` lock)."""
        self.granted = True
        if self.event is not None:
            self.event.set()
        else:
            assert self.loop is not None and self.future is not None
            self.loop.call_soon_threadsafe(_resolve, self.future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Slots:
    """A counting semaphore usable from threads and from any event loop."""

    def __init__(self, n: int) -> None:
        self.size = n
        self._free = n
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_use(self) -> int:
        return self.size - self._free

    def _try(self) -> bool:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    def acquire(self, timeout: float | None) -> bool:
        """Take a slot, waiting at most `timeout` seconds (`None`: as long as it takes)."""
        with self._lock:
            if self._try():
                return True
            waiter = _Waiter()
            self._waiters.append(waiter)
        assert waiter.event is not None
        waiter.event.wait(timeout)
        return self._settle(waiter)

    async def aacquire(self, timeout: float | None) -> bool:
        """Async `acquire`: waits without blocking the event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._try():
                return True
            future: asyncio.Future[None] = loop.create_future()
            waiter = _Waiter(loop=loop, future=future)
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            pass
        except asyncio.CancelledError:
            if self._settle(waiter):
                self.release()  # granted as we were cancelled: pass it on
            raise
        return self._settle(waiter)

    def _settle(self, waiter: _Waiter) -> bool:
        """Whether `waiter` got its slot; if not, it leaves the queue."""
        with self._lock:
            if waiter.granted:
                return True
            self._waiters.remove(waiter)
            return False

    def release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().wake()
            else:
                self._free += 1
