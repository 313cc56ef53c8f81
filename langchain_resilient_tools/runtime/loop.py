"""Running coroutines from sync code: a private event loop on a daemon thread.

Async-only tools (MCP tools, for one) have no sync implementation. `run_sync` runs such
a tool's coroutine on one process-wide event loop that lives on its own daemon thread,
and waits for it; a tool bound to an MCP session that lives on another loop (the
application's) runs on that loop instead (`home_loop`). With a `timeout`, the coroutine is cancelled at the deadline (so an
MCP session it opened is closed) and `AttemptTimeout` is raised. An attempt of a hedge
race (its `Probe`) that lost is cancelled the same way, and `Superseded` is raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from ..core.call import Call
from ..core.errors import AttemptTimeout, SessionUnavailable, Superseded
from ..core.probe import Probe
from . import exit as _exit

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
                _exit.watch(loop, private=True)  # closed at interpreter exit
                _loop = loop
    return _loop


def current() -> asyncio.AbstractEventLoop | None:
    """The private loop, if it was started."""
    return _loop


START_WAIT_S = 5.0
"""How long a session-bound tool's call may wait for its session's loop to take it up
(capped by the attempt's timeout). A call made from the loop itself is refused at once
(`_check_home`); this wait only tells a loop another thread blocks, and must not mistake
a loop that is merely slow to get to it on a loaded machine (1 s did, at load 10)."""


def home_loop(tool: Any) -> asyncio.AbstractEventLoop | None:
    """The event loop a session-bound tool belongs to, if it is one.

    langchain-mcp-adapters' ``load_mcp_tools(session)`` makes tools whose coroutine
    holds the `ClientSession`; the session's streams and tasks live on the loop that
    opened it, and the tool can only run there. Found through the session's (anyio)
    task group; `None` for any other tool.
    """
    fn = getattr(tool, "coroutine", None)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            held = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        group = getattr(held, "_task_group", None)
        if group is None or not hasattr(held, "call_tool"):
            continue
        scope = getattr(group, "cancel_scope", None)
        tasks = [*getattr(group, "_tasks", ()), getattr(scope, "_host_task", None)]
        for task in tasks:
            get_loop = getattr(task, "get_loop", None)
            if get_loop is not None:
                loop = get_loop()
                if isinstance(loop, asyncio.AbstractEventLoop):
                    return loop
    return None


def run_sync(
    make: Callable[[], Awaitable[T]],
    timeout: float | None = None,
    *,
    home: asyncio.AbstractEventLoop | None = None,
    probe: Probe | None = None,
) -> T:
    """Run the coroutine made by `make` on the private loop and return its result.

    `home`: the loop a session-bound tool belongs to (`home_loop`); the coroutine runs
    there instead. If that loop is closed, not running, or does not take the call up
    within `START_WAIT_S` (its thread is blocked, typically by this very sync call made
    from a coroutine on it), `SessionUnavailable` says so at once. The caller's context
    variables (LangChain's run config among them) go along. `probe`: the hedge race's
    probe of this attempt (`core.probe`); should the race be decided without it, the
    coroutine is cancelled and `Superseded` raised.
    """
    ctx = contextvars.copy_context()
    started = threading.Event()

    async def main() -> T:
        started.set()
        return await make()

    if home is not None:
        _check_home(home)
    loop = home or private_loop()
    fut: concurrent.futures.Future[T] = concurrent.futures.Future()

    def start(fut: concurrent.futures.Future[T]) -> None:
        task = ctx.run(loop.create_task, main())
        _chain(task, fut)

    try:
        loop.call_soon_threadsafe(start, fut)
    except RuntimeError:  # closed meanwhile
        raise SessionUnavailable(SESSION_CLOSED) from None
    if home is not None:
        wait = START_WAIT_S if timeout is None else min(START_WAIT_S, timeout)
        if not started.wait(wait) and not fut.done():
            loop.call_soon_threadsafe(fut.cancel)
            raise SessionUnavailable(SESSION_BLOCKED)
    if probe is not None and not probe.cancel_with(partial(_cancel, loop, fut)):
        _cancel(loop, fut)  # the race was decided before it began
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        assert timeout is not None
        loop.call_soon_threadsafe(fut.cancel)
        raise AttemptTimeout(timeout) from None
    except concurrent.futures.CancelledError:
        if probe is not None and probe.superseded:
            raise Superseded() from None
        raise
    finally:
        del fut  # it holds the tool's error, whose traceback holds this frame


def run_for(call: Call, make: Callable[[], Awaitable[T]], tool: Any) -> T:
    """`run_sync` for an attempt of `call`: the coroutine made by `make`, of the
    async-only `tool`, on the tool's session loop if it has one (`home_loop`), cancelled
    at the attempt's timeout (`Call.attempt_timeout`; its policy's outside the attempt
    stage) or when the attempt lost its hedge race (`Call.probe`)."""
    timeout = call.attempt_timeout
    if timeout is None:
        timeout = call.resolved.policy.timeout
    return run_sync(make, timeout, home=home_loop(tool), probe=call.probe)


def _cancel(loop: asyncio.AbstractEventLoop, fut: concurrent.futures.Future[Any]) -> None:
    """Cancel `fut` (and so the task chained to it) from any thread."""
    try:
        loop.call_soon_threadsafe(fut.cancel)
    except RuntimeError:  # the loop is closed: nothing runs there any more
        fut.cancel()


SESSION_CLOSED = "closed"
SESSION_BLOCKED = "blocked"


def _check_home(home: asyncio.AbstractEventLoop) -> None:
    if home.is_closed() or not home.is_running():
        raise SessionUnavailable(SESSION_CLOSED)
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is home:  # waiting here would block the very loop that must answer
        raise SessionUnavailable(SESSION_BLOCKED)


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
