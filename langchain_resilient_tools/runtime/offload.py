"""Stand-in tools that change where a tool runs, for requests the pipeline does not
execute itself (ToolNode's and LangChain's handlers execute them).

`OffloadedTool`: LangChain runs a sync tool's ``ainvoke`` on the event loop's default
executor, which has ``min(32, cpus + 4)`` threads and no notion of a deadline: a
handful of hung calls fill it, and every later sync tool, and whatever else the
application runs there, waits behind them. Its ``ainvoke`` runs the sync tool on the
pipeline's `TimedRunner` instead: a thread still running when its attempt times out (or
its caller is cancelled) is counted, and capped per tool by ``max_abandoned_threads``.

`BridgedTool`: an async-only tool (MCP tools, for one) cannot run from sync code at
all (``StructuredTool does not support sync invocation``). Its ``invoke`` runs the
tool's coroutine on the private loop of `runtime.loop.run_sync`, cancelled at its
attempt's timeout, or when it lost a hedge race.
"""

from __future__ import annotations

from functools import partial
from typing import Any, cast

from langchain_core.tools import BaseTool

from ..core.call import Call
from ..core.tools import ToolStandIn, has_native_async, has_sync
from .executor import TimedRunner
from .loop import run_for


class OffloadedTool(ToolStandIn):
    """`tool` with ``ainvoke`` on the pipeline's workers (it may wrap a `_KeyedTool`)."""

    __slots__ = ("_runner",)

    def __init__(self, tool: Any, runner: TimedRunner, call: Call) -> None:
        super().__init__(tool, call)
        self._runner = runner

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        call = self._call
        fn = partial(self._tool.invoke, input, config, **kwargs)
        if call.probe is not None:  # an attempt of a hedge race: stamped on its worker
            fn = partial(call.probe.run, fn)
        # No timeout of its own: the attempt's deadline cancels this, and the runner
        # counts the thread it leaves running; the attempt stage tells a write's timeout
        # of the job (`Call.job`), which may yet take effect.
        resolved = call.resolved
        return await self._runner.arun(
            call.name, fn, None, resolved.max_abandoned_threads,
            None if resolved.idempotent else partial(setattr, call, "job"),
        )  # fmt: skip


def offloaded(request: Any, call: Call, runner: TimedRunner) -> Any:
    """`request` (a ``ToolCallRequest``) with its tool offloaded when that tool is sync."""
    tool = request.tool
    if tool is None or has_native_async(call.tool or tool):
        return request
    return request.override(tool=cast(BaseTool, OffloadedTool(tool, runner, call)))


class BridgedTool(ToolStandIn):
    """`tool` with a sync ``invoke`` that runs its coroutine (it may wrap a `_KeyedTool`)."""

    __slots__ = ()

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        # The coroutine is cancelled (and an MCP session it opened closed) when its
        # attempt times out, or when it lost a hedge race.
        call = self._call
        return run_for(call, lambda: self._tool.ainvoke(input, config, **kwargs), call.tool)


def bridged(request: Any, call: Call) -> Any:
    """`request` (a ``ToolCallRequest``) with an async-only tool made callable from sync code."""
    tool = request.tool
    if tool is None or has_sync(call.tool or tool):
        return request
    return request.override(tool=cast(BaseTool, BridgedTool(tool, call)))
