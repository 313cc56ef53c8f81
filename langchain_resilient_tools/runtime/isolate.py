"""Process isolation: run one attempt of a sync tool in a worker process that can be killed.

A thread cannot be stopped; a process can. With ``ToolPolicy(timeouts=Timeouts(isolate=True))`` each
attempt runs in a worker process (started with ``forkserver`` where available, else
``spawn``; never ``fork``, which is unsafe in a threaded process). Workers are reused;
one whose call passes its timeout is killed at once and replaced on a later call. A
worker's start-up (importing the tool's module) is not counted against the timeout.

Requirements: what runs in the worker, the arguments and the result must be picklable.
For a `StructuredTool` (e.g. from ``@tool``) the worker gets its function, which must be
a module-level function (importable by the worker), not a closure or a lambda; it is
called with the arguments as keywords. Any other `BaseTool` is sent whole and invoked
there, so the tool object itself must pickle. Injected arguments (state, store,
runtime) and anything that wraps the tool call (``wrap_tool_call``, inner middleware)
are not applied in the worker. Async-only tools cannot be isolated.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import pickle
import threading
from collections.abc import Iterable
from multiprocessing.connection import Connection
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from ..core.errors import AttemptTimeout, ToolRaised, UsageError


def _context() -> Any:
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    # Imported once in the fork server, so each new worker starts in milliseconds (a
    # no-op when the process already started its fork server).
    ctx.set_forkserver_preload(["langchain_resilient_tools.runtime.isolate"])
    return ctx


def _target(tool: BaseTool) -> Any:
    """What the worker runs: a structured tool's function, else the tool itself."""
    if isinstance(tool, StructuredTool) and tool.func is not None:
        return tool.func
    return tool


def check_picklable(tool: BaseTool) -> None:
    """Raise `UsageError` when `tool` cannot be sent to a worker process."""
    try:
        pickle.dumps(_target(tool))
    except Exception as exc:
        raise UsageError(
            f"tool {tool.name!r} has Timeouts(isolate=True), which runs it in a worker process that "
            f"receives the tool pickled, but it cannot be pickled ({type(exc).__name__}: "
            "a lambda, a nested function, a closure or an object holding a lock, socket "
            "or client cannot be). What works: define the function at module level and "
            "make the tool from it (@tool or StructuredTool.from_function), creating "
            "clients inside the function; or keep Timeouts(isolate=False), with a timeout."
        ) from exc


STARTUP_TIMEOUT = 60.0
"""Seconds a new worker process may take to start (not counted against the tool's timeout)."""


def check_isolated(resolver: Any, tools: Iterable[BaseTool]) -> None:
    """`check_picklable` for each of `tools` whose resolved policy says ``isolate=True``."""
    for tool in tools:
        if resolver.resolve(tool.name).policy.timeouts.isolate:
            check_picklable(tool)


def _serve(conn: Connection) -> None:
    """Worker process body: run calls until the pipe closes; answer (ok, value or error)."""
    conn.send("ready")
    while True:
        try:
            target, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            value = target.invoke(args) if isinstance(target, BaseTool) else target(**args)
            result: tuple[bool, Any] = (True, value)
        except Exception as exc:
            result = (False, exc)
        try:
            conn.send(result)
        except Exception as exc:  # an unpicklable result or exception
            conn.send((False, RuntimeError(f"result could not be sent back: {type(exc).__name__}")))


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self) -> None:
        ctx = _context()
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(STARTUP_TIMEOUT) or self.conn.recv() != "ready":
            self.kill()
            raise ToolRaised(RuntimeError("the isolation worker did not start"))

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(1.0)
        self.conn.close()


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _acquire() -> _Worker:
    with _idle_lock:
        while _idle:
            worker = _idle.pop()
            if worker.proc.is_alive():
                return worker
    return _Worker()


def _release(worker: _Worker) -> None:
    with _idle_lock:
        _idle.append(worker)


def prewarm(n: int) -> None:
    """Make sure `n` idle workers are ready (e.g. at start-up), starting them in parallel."""
    with _idle_lock:
        missing = n - sum(1 for w in _idle if w.proc.is_alive())
    threads = [threading.Thread(target=lambda: _release(_Worker())) for _ in range(missing)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_isolated(tool: BaseTool, args: dict[str, Any], timeout: float | None) -> Any:
    """Run `tool` with `args` in a worker process; kill it and raise at the timeout.

    Workers are reused between calls; a worker is killed (and later replaced) only when
    its call times out or it dies.
    """
    worker = _acquire()
    try:
        worker.conn.send((_target(tool), args))
    except Exception as exc:  # arguments that do not pickle
        _release(worker)
        raise ToolRaised(exc) from exc
    if not worker.conn.poll(timeout):
        worker.kill()
        raise AttemptTimeout(timeout if timeout is not None else 0.0)
    try:
        ok, payload = worker.conn.recv()
    except (EOFError, OSError):  # the worker died without answering
        worker.kill()
        raise ToolRaised(RuntimeError("the worker process exited")) from None
    _release(worker)
    if ok:
        return payload
    raise ToolRaised(payload)


async def arun_isolated(tool: BaseTool, args: dict[str, Any], timeout: float | None) -> Any:
    """`run_isolated` without blocking the event loop."""
    return await asyncio.to_thread(run_isolated, tool, args, timeout)
