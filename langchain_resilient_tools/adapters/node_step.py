"""How `ResilientToolNode` runs one step: every call of an AIMessage, sync or async.

The sync path runs no pool per step: the stages of parallel calls are tasks of a
private event loop of the calling thread (`runtime.steploop`), their tools run on the
pipeline's persistent workers; where a loop already runs in the thread (Jupyter), the
calls go to a persistent pool of threads instead. Both paths honour
``max_concurrency``, run the first of identical calls first, write error records to
``tool_errors``, and at the end of a step write dedup entries to ``tool_ledger`` and do
a ``rollback`` of a useless result (see `adapters.rollback.finish_node_step`).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Literal

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolRuntime
from langgraph.runtime import Runtime

from ..core.call import Call
from ..pipeline import Pipeline, Step
from ..runtime.executor import dispatch_pool
from ..runtime.steploop import run_step, step_loop
from .context import INPUT_TYPE
from .node_review import ReviewedSteps


class StepNode(ReviewedSteps):
    """The step drivers of `ResilientToolNode` (its base; not used alone)."""

    pipeline: Pipeline
    _steps: dict[int, Step]
    """The open step of each `ToolRuntime` of a running step, by the runtime's id: the
    wrapper ToolNode calls for a call finds its step there (`adapters.node`)."""

    def _sync_call(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]
    ) -> Call:
        """The `Call` for `request`, run by the sync `execute` (see `adapters.node`)."""
        raise NotImplementedError

    def _open_step(
        self, tool_calls: list[ToolCall], runtimes: list[ToolRuntime], config: RunnableConfig
    ) -> Step:
        """The pipeline's step of `tool_calls`, found by the wrapper through each call's
        runtime until the step is done."""
        state = runtimes[0].state if runtimes else None
        step = self.pipeline.open_step(tool_calls, state, config)
        for rt in runtimes:
            self._steps[id(rt)] = step
        return step

    def _step_of(self, request: ToolCallRequest) -> Step:
        """The step `request` belongs to, or the pipeline's loose one (a call outside a
        step this node runs)."""
        return self._steps.get(id(request.runtime)) or self.pipeline.loose_step

    # -- drivers -------------------------------------------------------------------

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        tool_calls, input_type = self._parse_input(input)
        runtimes = self._runtimes(input, tool_calls, config, runtime)
        step = self._open_step(tool_calls, runtimes, config)
        twins = list(step.order)  # the index of each call's earlier twin, if any
        try:
            if self._reviewed_step(tool_calls):  # a write may ask a person
                outputs = self._reviewed(tool_calls, runtimes, twins, input_type, config)
            elif len(tool_calls) <= 1:
                outputs = [
                    self._run_one(tc, input_type, rt)
                    for tc, rt in zip(tool_calls, runtimes, strict=True)
                ]
            elif (loop := step_loop()) is not None:
                run = partial(self._run_one_offloaded, input_type=input_type)
                coro = self._arun_all(tool_calls, runtimes, twins, config, run=run)
                outputs = run_step(loop, coro)
            else:
                outputs = self._run_all_threaded(tool_calls, runtimes, twins, input_type, config)
        finally:  # the step is closed: its runtimes no longer find it
            for rt in runtimes:
                self._steps.pop(id(rt), None)
        return self._step_output(outputs, input_type, input, runtimes, config, step)

    def _run_all_threaded(
        self,
        tool_calls: list[ToolCall],
        runtimes: list[ToolRuntime],
        twins: list[int | None],
        input_type: Literal["list", "dict", "tool_calls"],
        config: RunnableConfig,
    ) -> list[Any]:
        """The calls of a sync step on threads (where an event loop already runs here);
        `twins`: the index of each call's earlier identical call, if any."""
        n = len(tool_calls)
        limit = config.get("max_concurrency") or n
        gate = threading.BoundedSemaphore(limit) if limit < n else None
        ran = [threading.Event() for _ in range(n)]

        def job(i: int) -> Any:
            if (j := twins[i]) is not None:  # identical calls: the first one runs first
                ran[j].wait()
            try:
                if gate is None:
                    return self._run_one(tool_calls[i], input_type, runtimes[i])
                with gate:
                    return self._run_one(tool_calls[i], input_type, runtimes[i])
            finally:
                ran[i].set()

        pool = dispatch_pool()
        futures = [pool.submit(_bind(contextvars.copy_context(), job, i)) for i in range(1, n)]
        first: list[Any] = []
        error: BaseException | None = None
        try:
            first.append(job(0))
        except BaseException as exc:  # re-raised once the siblings are done
            error = exc
        rest = []
        for fut in futures:
            try:
                rest.append(fut.result())
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error
        return first + rest

    async def _run_one_offloaded(
        self,
        tool_call: ToolCall,
        tool_runtime: ToolRuntime,
        *,
        input_type: Literal["list", "dict", "tool_calls"],
    ) -> Any:
        """One call of a sync step on the step's private loop: ToolNode's `_run_one`
        with the stages awaited here and the (sync) tool run on the pipeline's workers."""
        request = ToolCallRequest(
            tool_call=tool_call,
            tool=self.tools_by_name.get(tool_call["name"]),
            state=tool_runtime.state,
            runtime=tool_runtime,
        )
        config = tool_runtime.config

        def execute(req: ToolCallRequest) -> Any:
            return self._execute_tool_sync(req, input_type, config)

        call = self._sync_call(request, execute)
        call.offload = True
        outcome = await self.pipeline.arun(call, sync_callbacks=True)
        if Step.as_answered(outcome):
            return outcome.value
        return self._step_of(request).answer(outcome, self._answer(outcome))

    async def _afunc(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        tool_calls, input_type = self._parse_input(input)
        runtimes = self._runtimes(input, tool_calls, config, runtime)
        INPUT_TYPE.set(input_type)  # read by `_awrap` for sync tools; tasks copy it
        step = self._open_step(tool_calls, runtimes, config)
        twins = list(step.order)  # the index of each call's earlier twin, if any
        try:
            if self._reviewed_step(tool_calls):  # a write may ask a person
                outputs = await self._areviewed(tool_calls, runtimes, twins, input_type, config)
            elif len(tool_calls) == 1:  # no task (and no loop turns) needed to run one call
                outputs = [await self._arun_one(tool_calls[0], input_type, runtimes[0])]
            else:
                run = partial(_call_with_type, self._arun_one, input_type)
                outputs = await self._arun_all(tool_calls, runtimes, twins, config, run=run)
        finally:  # the step is closed: its runtimes no longer find it
            for rt in runtimes:
                self._steps.pop(id(rt), None)
        return self._step_output(outputs, input_type, input, runtimes, config, step)

    async def _arun_all(
        self,
        tool_calls: list[ToolCall],
        runtimes: list[ToolRuntime],
        twins: list[int | None],
        config: RunnableConfig,
        *,
        run: Callable[[ToolCall, ToolRuntime], Awaitable[Any]],
    ) -> list[Any]:
        """Every call of the step, concurrently (`run`: how one call runs, e.g. ToolNode's
        `_arun_one`, which enters the pipeline through `_awrap`); `twins`: the index of
        each call's earlier identical call, if any (it runs first)."""
        limit = config.get("max_concurrency")
        gate = asyncio.Semaphore(limit) if limit and limit < len(tool_calls) else None
        pairs = list(zip(tool_calls, runtimes, strict=True))
        if gate is None and not any(j is not None for j in twins):
            coros = [run(tc, rt) for tc, rt in pairs]
        else:
            ran = [asyncio.Event() for _ in tool_calls]

            async def job(i: int, tc: ToolCall, rt: ToolRuntime) -> Any:
                if (j := twins[i]) is not None:  # identical calls: the first one runs first
                    await ran[j].wait()
                try:
                    if gate is None:
                        return await run(tc, rt)
                    async with gate:
                        return await run(tc, rt)
                finally:
                    ran[i].set()

            coros = [job(i, tc, rt) for i, (tc, rt) in enumerate(pairs)]
        # Like the sync path, a call that raises (an interrupt) is re-raised only once its
        # siblings are done: none is left running in the background, and a resumed step
        # finds their answers recorded instead of running them again.
        results = await asyncio.gather(*coros, return_exceptions=True)
        outputs: list[Any] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            outputs.append(result)
        return outputs


def _bind(ctx: contextvars.Context, fn: Callable[[int], Any], i: int) -> Callable[[], Any]:
    return lambda: ctx.run(fn, i)


def _call_with_type(
    arun_one: Callable[..., Awaitable[Any]],
    input_type: Literal["list", "dict", "tool_calls"],
    tool_call: ToolCall,
    tool_runtime: ToolRuntime,
) -> Awaitable[Any]:
    return arun_one(tool_call, input_type, tool_runtime)
