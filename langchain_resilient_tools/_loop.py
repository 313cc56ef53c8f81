"""Running coroutines from sync code: a private event loop on a daemon thread.

Async-only tools (MCP tools, for one) have no sync implementation. `run_sync` runs such
a tool's coroutine on one process-wide event loop that lives on its own daemon thread,
and waits for it. With a `timeout`, the coroutine is cancelled at the deadline (so an
MCP session it opened is closed) and `AttemptTimeout` is raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._errors import AttemptTimeout

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def private_loop() -> asyncio.AbstractEventLoop:
    """The process-wide background loop (started on first use)."""
    global _loop
    if _loop is None:
        with _lock:
            if _loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="lrt-async-tools", daemon=True
                ).start()
                _loop = loop
    return _loop


def run_sync(make: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
    """Run the coroutine made by `make` on the private loop and return its result.

    The caller's context variables (LangChain's run config among them) go along.
    """
    ctx = contextvars.copy_context()

    async def main() -> T:
        return await make()

    loop = private_loop()
    fut: concurrent.futures.Future[T] = concurrent.futures.Future()

    def start() -> None:
        task = ctx.run(loop.create_task, main())
        _chain(task, fut)

    loop.call_soon_threadsafe(start)
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        assert timeout is not None
        loop.call_soon_threadsafe(fut.cancel)
        raise AttemptTimeout(timeout) from None


def _chain(task: asyncio.Task[Any], fut: concurrent.futures.Future[Any]) -> None:
    def done(t: asyncio.Task[Any]) -> None:
        if fut.done():
            return
        if t.cancelled():
            fut.cancel()
        elif t.exception() is not None:
            fut.set_exception(t.exception())  # type: ignore[arg-type]
        else:
            fut.set_result(t.result())

    def cancelled(f: concurrent.futures.Future[Any]) -> None:
        if f.cancelled() and not task.done():
            task.cancel()

    task.add_done_callback(done)
    fut.add_done_callback(cancelled)
