"""A tool's coroutine awaited with a deadline, driven from the caller's own task.

A task of its own for every async attempt would cost two turns of the event loop (one
for it to start, one for the caller to hear that it finished), and a loop turn costs as
much as a fast tool. `drive` runs the coroutine's steps itself instead, each in one
copy of the caller's context (as a task runs them), and between two steps waits for
what the coroutine waits for *or* for the deadline, whichever comes first. At the
deadline (one of the loop's `runtime.alarms`) what the coroutine waits for is cancelled (so that the cancellation reaches
the tool, as a task's cancellation does), the coroutine is handed to a task of its own
that goes on from where it stopped (`_resume`; kept until it finishes), and the caller
gets `AttemptTimeout` at once, whether or not the tool ever acknowledges it.

During the coroutine's steps ``asyncio.current_task()`` is the caller's task, as for a
coroutine ToolNode awaits directly; so a cancellation of the caller's task is passed on
to the coroutine as if the caller awaited it directly: what the coroutine waits for is
cancelled (or the coroutine is thrown `CancelledError` at its next step), and the
coroutine decides. That cancellation may come from the caller's own caller, or from the
coroutine itself: ``asyncio.timeout()`` and ``asyncio.TaskGroup`` cancel the current
task, and a user's ``awrap_tool_call`` (or another middleware) that bounds the tool with
one expects to catch its own `TimeoutError`. The coroutine goes on being driven until it
returns or raises (normally the `CancelledError`), or until the deadline: then it is
handed on as above and the caller gets `CancelledError`. A coroutine that returns while
the cancellation is still asked for (not consumed with ``Task.uncancel``, as
``asyncio.timeout`` consumes its own) leaves the caller `CancelledError`, as the task
`ToolNode` gathers a call in would.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

from ..core.errors import AttemptTimeout
from . import exit as _exit
from .alarms import alarms_for

T = TypeVar("T")


class _Watch:
    """What the caller waits on between two steps (`gate`): it opens when what the
    coroutine waits for is done (`wake`), or at the deadline (`expire`)."""

    __slots__ = ("expired", "gate")

    def __init__(self) -> None:
        self.expired = False
        self.gate: asyncio.Future[None] | None = None

    def wake(self, _done: Any = None) -> None:
        gate = self.gate
        if gate is not None and not gate.done():
            gate.set_result(None)

    def expire(self) -> None:
        self.expired = True
        self.wake()


async def drive(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Await `coro` (not started yet) for at most `timeout` seconds (see the module).

    A coroutine that finishes in its first step needs no alarm: nothing could interrupt
    a step that runs without yielding. Its deadline is fixed before that step all the
    same, and armed only when the coroutine waits (a LangChain tool always does: it
    runs its coroutine as a task of its own). The waiting is written here, not in a
    coroutine of its own: one frame less to make and to resume on every call."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    deadline = loop.time() + timeout
    try:
        pending = context.run(coro.send, None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    # `coro` yielded `pending` (what it waits for) and goes on until it returns or its
    # deadline (loop time) passes.
    watch = _Watch()
    alarms = alarms_for(loop)
    alarm = alarms.at(deadline, watch.expire)
    cancelled: asyncio.CancelledError | None = None  # the caller's task was cancelled
    base = 0  # its pending cancellation requests before that
    try:
        while True:
            if pending is not None:
                if not (
                    getattr(pending, "_asyncio_future_blocking", False)
                    and pending.get_loop() is loop
                ):  # not a future of this loop (``await future``): only a task handles it
                    return await _in_task(coro, pending, loop, context, watch, timeout)
                pending._asyncio_future_blocking = False  # taken, as a task takes it
            thrown: BaseException | None = None
            while True:  # until what the coroutine waits for is done, or the deadline
                watch.gate = gate = loop.create_future()
                if pending is None:  # a bare yield (``asyncio.sleep(0)``): one loop turn
                    loop.call_soon(watch.wake)
                else:
                    pending.add_done_callback(watch.wake)
                try:
                    await gate
                    break
                except GeneratorExit:
                    coro.close()
                    raise
                except asyncio.CancelledError as exc:  # passed on, as to an awaited coroutine
                    if watch.expired:
                        _hand_off(coro, pending, loop, context, watch)
                        raise
                    if cancelled is None:
                        base = _requests() - 1
                    cancelled = exc
                    if pending is not None:
                        pending.remove_done_callback(watch.wake)
                        if pending.cancel(exc.args[0] if exc.args else None):
                            continue  # it hears of it through what it waits for
                    thrown = exc  # nothing left to cancel: thrown in at its next step
                    break
                except BaseException:
                    _hand_off(coro, pending, loop, context, watch)
                    raise
            if watch.expired and thrown is None and not (pending is not None and pending.done()):
                _hand_off(coro, pending, loop, context, watch)
                raise _asked(cancelled, base) or AttemptTimeout(timeout)
            try:
                if thrown is None:
                    pending = context.run(coro.send, None)
                else:
                    pending = context.run(coro.throw, thrown)
            except StopIteration as stop:
                if (asked := _asked(cancelled, base)) is not None:
                    raise asked from None  # as the task ToolNode gathers a call in does
                return stop.value  # type: ignore[no-any-return]
            if watch.expired:  # the deadline passed while it ran: it goes on alone
                _hand_off(coro, pending, loop, context, watch)
                raise _asked(cancelled, base) or AttemptTimeout(timeout)
    finally:
        alarms.cancel(alarm)
        # A failure's traceback holds this frame: not the coroutine it came from too
        # (from Python 3.12 on, its frame there names the coroutine: a cycle), nor the
        # cancellation it raises (a hedge race's cancelled loser raises `cancelled`).
        del coro, pending
        cancelled = thrown = None


def _requests() -> int:
    """The cancellation requests pending on the current task (``Task.cancelling``): one
    the coroutine consumed (``asyncio.timeout`` does, with ``uncancel``) is not counted."""
    task = asyncio.current_task()
    return 1 if task is None else task.cancelling()


def _asked(cancelled: asyncio.CancelledError | None, base: int) -> asyncio.CancelledError | None:
    """`cancelled` (the caller's task's cancellation) if it is still asked for: more
    requests pending than the `base` before it (none consumed it since)."""
    return cancelled if cancelled is not None and _requests() > base else None


def _hand_off(
    coro: Coroutine[Any, Any, Any],
    pending: Any,
    loop: asyncio.AbstractEventLoop,
    context: contextvars.Context,
    watch: _Watch,
) -> None:
    """`coro`, waiting for `pending`, cancelled as a task of its own is cancelled (what
    it waits for first) and handed to a task of its own, kept until it finishes."""
    thrown: BaseException | None = asyncio.CancelledError()
    if pending is not None and hasattr(pending, "_asyncio_future_blocking"):
        pending.remove_done_callback(watch.wake)
        pending._asyncio_future_blocking = True  # awaited again, now by the task
        if pending.cancel():  # the cancellation reaches the coroutine through it
            thrown = None
    keep(loop.create_task(_resumed(coro, pending, thrown), context=context))
    if isinstance(pending, asyncio.Task):  # what it waits for (LangChain's task of the tool)
        _exit.abandon(pending)


async def _in_task(
    coro: Coroutine[Any, Any, T],
    pending: Any,
    loop: asyncio.AbstractEventLoop,
    context: contextvars.Context,
    watch: _Watch,
    timeout: float,
) -> T:
    """The rest of `coro` as a task of its own (it yielded what only a task handles),
    awaited until the deadline (`watch`)."""
    task = loop.create_task(_resumed(coro, pending, None), context=context)
    watch.gate = gate = loop.create_future()
    task.add_done_callback(watch.wake)
    try:
        await gate
    except BaseException:
        task.cancel()  # the caller is cancelled: so is the tool
        keep(task)
        raise
    if not task.done():
        task.cancel()
        keep(task)
        raise AttemptTimeout(timeout)
    return task.result()


async def _resumed(coro: Coroutine[Any, Any, T], pending: Any, thrown: BaseException | None) -> T:
    """`_resume` as a native coroutine: a task takes nothing else from Python 3.12 on."""
    return await _resume(coro, pending, thrown)


@types.coroutine
def _resume(
    coro: Coroutine[Any, Any, T], pending: Any, thrown: BaseException | None
) -> Generator[Any, Any, T]:
    """The rest of `coro`, whose last step yielded `pending` (what it waits for), driven
    by the task that runs this: what the task sends or throws goes on to `coro`
    (`thrown` first, if given)."""
    while True:
        if thrown is None:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation, thrown in by the task
                thrown = exc
                continue
            try:
                pending = coro.send(sent)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
        else:
            try:
                pending = coro.throw(thrown)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                thrown = None  # what it raises may be this, whose traceback holds this frame


_running: set[asyncio.Future[Any]] = set()
"""Tool tasks running past their deadline: held here until they finish."""


def keep(task: asyncio.Task[Any]) -> None:
    """Hold `task` (a tool run past its deadline) until it finishes; it is not waited
    for when its loop shuts down."""
    _running.add(task)
    task.add_done_callback(_running.discard)
    _exit.abandon(task)
