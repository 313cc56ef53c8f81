"""A private event loop per thread, to drive the parallel calls of one sync node step.

A sync step with several tool calls needs each call's stages to wait on its own
attempt while the other calls go on. Threads can do that, at the price of a second
hand-off per call (one thread runs the call's stages, a worker runs its tool). A
coroutine per call does it with one: the stages of every call run on this thread, as
tasks of a private event loop, and only the tools go to the pipeline's workers, where
their deadlines hold as usual (`TimedRunner.arun`).

The loop belongs to the thread that made it and is reused by its later steps. It can
only be used where no event loop is already running in the thread (a Jupyter cell
that calls ``graph.invoke`` is one such place): `step_loop` returns `None` there, and
the caller falls back to threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _Holder:
    """Owns one thread's loop and closes it when the thread's locals are dropped."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        loop = getattr(self, "loop", None)
        if loop is None or loop.is_closed() or loop.is_running():
            return
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if pending and not _loop_running_here():  # e.g. a hedge's loser, left to finish
            with contextlib.suppress(Exception):
                _discard(loop, pending)  # cancelled: it ends, and its references go
        if not loop.is_closed():
            loop.close()


_local = threading.local()


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def step_loop() -> asyncio.AbstractEventLoop | None:
    """This thread's private loop, or `None` when a loop is already running here."""
    if _loop_running_here():
        return None
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _Holder()
    return holder.loop


def run_step(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion on `loop` (from `step_loop`).

    If the run is cut short with tasks still pending (``KeyboardInterrupt``), they are
    cancelled and the loop is dropped, so nothing of this step runs in a later one.
    """
    try:
        return loop.run_until_complete(coro)
    except BaseException:
        if not loop.is_running():
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            if pending:
                _discard(loop, pending)
        raise


def _discard(loop: asyncio.AbstractEventLoop, pending: list[asyncio.Task[Any]]) -> None:
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is not None and holder.loop is loop:
        del _local.holder
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
    loop.close()
