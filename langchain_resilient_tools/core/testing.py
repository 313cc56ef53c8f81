"""Testing mode: backoff waits become instant, and are recorded instead.

``set_testing(True)`` turns it on for the whole process and returns a handle; used as a
context manager the handle restores the previous mode on exit::

    with set_testing(True) as t:
        graph.invoke(...)
    assert t.sleeps == [0.5, 1.0]

Timeouts stay real: they are deadlines a test can observe, not waits.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import TracebackType


class Testing:
    """Handle returned by `set_testing`; restores the previous mode when used as a context."""

    __slots__ = ("_previous", "active", "sleeps")

    def __init__(self, active: bool, previous: Testing | None) -> None:
        self.active = active
        self.sleeps: list[float] = []
        """Backoff waits that were asked for while this mode was on, in seconds."""
        self._previous = previous

    def __enter__(self) -> Testing:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _current
        with _lock:
            _current = self._previous or Testing(False, None)


_lock = threading.Lock()
_current = Testing(False, None)


def set_testing(testing: bool) -> Testing:
    """Turn testing mode on or off; the returned handle restores the previous mode on exit."""
    global _current
    with _lock:
        _current = Testing(bool(testing), _current)
        return _current


def is_testing() -> bool:
    """Whether testing mode is on."""
    return _current.active


def sleep(seconds: float) -> None:
    """Backoff wait for the sync driver (instant in testing mode)."""
    state = _current
    if state.active:
        state.sleeps.append(seconds)
    elif seconds > 0:
        time.sleep(seconds)


async def asleep(seconds: float) -> None:
    """Backoff wait for the async driver: never blocks the loop, instant in testing mode."""
    state = _current
    if state.active:
        state.sleeps.append(seconds)
        await asyncio.sleep(0)
    elif seconds > 0:
        await asyncio.sleep(seconds)
