"""At interpreter exit, close what the package started or holds.

Two things can outlive a script or hold up its exit:

- Tool coroutines abandoned at their deadline (`runtime.executor.await_with_timeout`) that
  ignore cancellation: ``asyncio.run`` waits for every task of its loop before it
  returns, so one such tool would delay the exit of an agent by as long as it runs.
  `abandon` takes them out of the loop's task list (they still run while the loop
  does; they are simply not waited for at shutdown).
- MCP stdio servers started for calls that timed out: the MCP client closes the
  server's stdin and gives it 2 s to exit before it terminates it, but a script that
  ends at once (its daemon loop thread with it) never gets there, and a server busy in
  sync code does not read its stdin: it lives on, re-parented. `close` (registered with
  `atexit`) cancels what still runs on the package's private loop, waits at most
  `GRACE_S`, then terminates the subprocesses still running that were started on the
  private loop or on a loop where a tool was abandoned (the process group of each:
  the MCP client starts servers in a session of their own).
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import os
import signal
import subprocess
import threading
import time
import weakref
from typing import Any

GRACE_S = 0.3
"""How long exit waits for the private loop's cancelled tasks to clean up."""
KILL_WAIT_S = 0.2
"""How long exit waits for terminated servers before it kills them."""

_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
"""Loops that run (or ran) package-held work: the private loop, loops with abandoned tools."""
_abandoned: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
_private: asyncio.AbstractEventLoop | None = None
"""The package's private loop (`runtime.loop`), whose tasks are cancelled at exit."""
_registered = False
_lock = threading.Lock()


def watch(loop: asyncio.AbstractEventLoop, *, private: bool = False) -> None:
    """Clean up after work the package leaves on `loop` at exit (`private`: the
    package's own loop, whose remaining tasks are cancelled first)."""
    global _registered, _private
    with _lock:
        _loops.add(loop)
        if private:
            _private = loop
        if not _registered:
            atexit.register(close)
            _registered = True


def abandon(task: asyncio.Task[Any]) -> None:
    """`task` (a tool run past its deadline), and the tasks it is waiting on (LangChain
    runs a tool's coroutine as a task of its own), are not waited for when their loop
    shuts down."""
    watch(task.get_loop())
    unregister = getattr(asyncio.tasks, "_unregister_task", None)
    for held in _awaited(task):
        _abandoned.add(held)
        if unregister is not None:
            unregister(held)
            # It may be left pending when its loop closes: that is the point, not a bug.
            held._log_destroy_pending = False  # type: ignore[attr-defined]


def _awaited(task: asyncio.Task[Any]) -> list[asyncio.Task[Any]]:
    """`task` and the tasks it waits on, through the chain of awaited futures."""
    out: list[asyncio.Task[Any]] = []
    todo: list[Any] = [task]
    while todo and len(out) < 100:
        fut = todo.pop()
        if isinstance(fut, asyncio.Task) and fut not in out:
            out.append(fut)
            todo.append(getattr(fut, "_fut_waiter", None))
        todo.extend(getattr(fut, "_children", ()) or ())  # asyncio.gather
    return out


def close() -> None:
    """Cancel the private loop's tasks (briefly awaited), then end leftover servers."""
    loop = _private
    pending = any(not t.done() for t in list(_abandoned))
    if loop is not None and loop.is_running():
        try:
            fut = asyncio.run_coroutine_threadsafe(_cancel_all(), loop)
            pending = fut.result(GRACE_S + 0.1) or pending
        except Exception:  # the loop is wedged or gone: the processes are handled below
            pending = True
    if pending:  # only then can a server still be running (a scan of the heap)
        _end_processes(set(_loops))


async def _cancel_all() -> bool:
    """Cancel every other task of the running loop; whether there were any."""
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=GRACE_S)
    return bool(tasks)


def _leftover(loops: set[asyncio.AbstractEventLoop]) -> list[subprocess.Popen[Any]]:
    """Running subprocesses whose asyncio transport belongs to one of `loops`."""
    if not loops:
        return []
    from asyncio.base_subprocess import BaseSubprocessTransport

    out = []
    for obj in gc.get_objects():
        if isinstance(obj, BaseSubprocessTransport) and obj._loop in loops:
            proc = obj._proc
            if proc is not None and proc.poll() is None:
                out.append(proc)
    return out


def _signal(proc: subprocess.Popen[Any], sig: int) -> None:
    try:
        if hasattr(os, "killpg") and os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)  # the server and whatever it started
        else:
            proc.send_signal(sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _end_processes(loops: set[asyncio.AbstractEventLoop]) -> None:
    procs = _leftover(loops)
    if not procs:
        return
    for proc in procs:
        _signal(proc, signal.SIGTERM)
    deadline = time.monotonic() + KILL_WAIT_S
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(proc, getattr(signal, "SIGKILL", signal.SIGTERM))
